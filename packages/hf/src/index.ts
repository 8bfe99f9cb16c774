// @dtorch/hf: HuggingFace models on DTorch (`import * as hf from '@dtorch/hf'`): configs read
// from config.json, fromPretrained from a local folder or the hub (through the HF cache), the
// T5 and CLIP text encoders with transformers' keys and outputs, on any mesh, and their
// tokenizers (HF's Rust tokenizers: Python's ids).
export { ConfigReader, readJsonFile, type Json, type JsonObject } from './configs/config_file.js';
export { PretrainedConfig } from './configs/pretrained_config.js';
export { T5Config } from './configs/t5_config.js';
export { CLIPTextConfig } from './configs/clip_text_config.js';
export { PreTrainedModel, type ModelOptions, type PretrainedModelClass } from './loading/pretrained_model.js';
export { type FromPretrainedOptions, type SourceOptions } from './loading/options.js';
export { AutoTokenizer, PreTrainedTokenizer, type BatchEncoding, type DecodeOptions, type EncodeOptions } from './tokenizers/index.js';
export { applyTpPlan, checkTpDivides, type TpPlan, type TpStyle } from './parallel/tp_plan.js';
export { batchPlacements, batchInput } from './parallel/batch.js';
export { T5EncoderModel, T5Stack, t5TpPlan, type T5EncoderOutput } from './models/t5/t5_encoder_model.js';
export {
  CLIPTextModel,
  CLIPTextModelWithProjection,
  CLIPTextTransformer,
  clipTpPlan,
  type CLIPTextCallOptions,
  type CLIPTextOutput,
  type CLIPTextWithProjectionOutput,
} from './models/clip/clip_text_model.js';
export * as nn from '@dtorch/nn';
