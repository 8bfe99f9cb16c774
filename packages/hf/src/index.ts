// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
// @dtorch/hf: HuggingFace models on DTorch (`import * as hf from '@dtorch/hf'`): configs read
// from config.json, fromPretrained from a local folder or the hub (through the HF cache), the
// T5 and CLIP text encoders with transformers' keys and outputs, their tokenizers (HF's Rust
// tokenizers: Python's ids), and the diffusion models with diffusers' keys and outputs (SD3 and
// Flux transformers, AutoencoderKL, the flow-matching scheduler), on any mesh.
export {
  ConfigReader,
  readJsonFile,
  type Json,
  type JsonObject,
} from "./configs/config_file.js";
export { PretrainedConfig } from "./configs/pretrained_config.js";
export { T5Config } from "./configs/t5_config.js";
export { CLIPTextConfig } from "./configs/clip_text_config.js";
export {
  PreTrainedModel,
  type ModelOptions,
  type PretrainedModelClass,
} from "./loading/pretrained_model.js";
export {
  type FromPretrainedOptions,
  type SourceOptions,
} from "./loading/options.js";
export {
  AutoTokenizer,
  PreTrainedTokenizer,
  type BatchEncoding,
  type DecodeOptions,
  type EncodeOptions,
} from "./tokenizers/index.js";
// the padding and truncation side of PreTrainedTokenizer
export { type Side } from "./tokenizers/tokenizer_config.js";
export {
  applyTpPlan,
  checkTpDivides,
  type TpPlan,
  type TpStyle,
} from "./parallel/tp_plan.js";
export { batchPlacements, batchInput } from "./parallel/batch.js";
export {
  T5EncoderModel,
  T5Stack,
  t5TpPlan,
  type T5EncoderOutput,
} from "./models/t5/t5_encoder_model.js";
export {
  CLIPTextModel,
  CLIPTextModelWithProjection,
  CLIPTextTransformer,
  clipTpPlan,
  type CLIPTextCallOptions,
  type CLIPTextOutput,
  type CLIPTextWithProjectionOutput,
} from "./models/clip/clip_text_model.js";
export { AutoencoderKLConfig } from "./configs/autoencoder_kl_config.js";
export {
  AutoencoderKL,
  type AutoencoderKLTilingOptions,
} from "./models/autoencoder_kl/autoencoder_kl.js";
export { type DiagonalGaussianDistribution } from "./models/autoencoder_kl/diagonal_gaussian.js";
export {
  SD3Transformer2DConfig,
  type SD3QkNorm,
} from "./configs/sd3_transformer_config.js";
export {
  SD3Transformer2DModel,
  sd3TpPlan,
  type SD3TransformerCallOptions,
} from "./models/sd3/sd3_transformer_2d_model.js";
export {
  FlowMatchEulerDiscreteScheduler,
  FlowMatchEulerDiscreteConfig,
  calculateShift,
  type FlowMatchEulerDiscreteSchedulerOutput,
  type SchedulerStepOptions,
  type SetTimestepsOptions,
  type TimeShiftType,
} from "./schedulers/index.js";
export { FluxTransformer2DConfig } from "./configs/flux_transformer_config.js";
export {
  FluxTransformer2DModel,
  fluxSequenceParallelPlan,
  fluxTpPlan,
  type FluxTransformerCallOptions,
} from "./models/flux/flux_transformer_2d_model.js";
export {
  joinSequence,
  splitSequence,
  gatherSequence,
  placeInputs,
  sequencePieces,
  type SequenceParallelPlan,
} from "./parallel/sequence_parallel.js";
export * as nn from "@dtorch/nn";
export {
  DiffusionPipeline,
  registerPipeline,
  type GenerateOptions,
  type GenerateOutput,
  type PipelineClass,
  type PipelineOptions,
  type StepInfo,
} from "./pipelines/diffusion_pipeline.js";
export { readModelIndex, type ModelIndex } from "./pipelines/model_index.js";
export { denormalize, toPngs, outputTypes, type OutputType } from "./pipelines/image_output.js";
export { fillRandomWeights } from "./pipelines/random_weights.js";
export { tinyTokenizer, tinyTokenizerFolder, type TinyTokenizerName } from "./pipelines/tiny/tiny_tokenizers.js";
export {
  FluxPipeline,
  type FluxEncodePromptOptions,
  type FluxGenerateOptions,
  type FluxPipelineComponents,
  type FluxPipelineInit,
  type FluxPromptEmbeds,
} from "./pipelines/flux_pipeline.js";
export { packLatents, unpackLatents, latentImageIds } from "./pipelines/flux_latents.js";
export {
  StableDiffusion3Pipeline,
  type SD3GenerateOptions,
  type StableDiffusion3Components,
} from "./pipelines/sd3_pipeline.js";
// SD3's prompt encoding: its options, result and text encoders, and Prompt (one prompt or a list)
export { type Prompt, type SD3EncodePromptOptions, type SD3PromptEmbeds, type SD3TextEncoders } from "./pipelines/sd3_prompt.js";
export { tinySD3Components, type TinySD3Options } from "./pipelines/tiny/tiny_sd3.js";
export { tinyPipelineSpec, randomModel, type TinyPipelineSpec } from "./pipelines/tiny/tiny_spec.js";
export { batchPlacementsOver } from "./parallel/batch.js";
