// @dtorch/hf: HuggingFace configs, tokenizers, models and pipelines arrive with their
// issues. Until then the package re-exports the layers it builds on.
export * as nn from '@dtorch/nn';
