// @dtorch/hf tokenizers: AutoTokenizer over HF's tokenizers (the Rust core Python uses, so the ids
// are Python's).
export { AutoTokenizer } from './auto_tokenizer.js';
export { PreTrainedTokenizer, type BatchEncoding, type DecodeOptions } from './pretrained_tokenizer.js';
export type { EncodeOptions } from './encode_options.js';
export type { BackendTokenizer, BackendEncoding, BackendPadding } from './backend_tokenizer.js';
// the padding and truncation side of PreTrainedTokenizer
export type { Side } from './tokenizer_config.js';
