// CLIP's text encoder, as transformers' CLIPTextModel and CLIPTextModelWithProjection: its config,
// the models, their submodules (named and nested as the checkpoint's keys, text_model.*) and how
// they map onto mesh dims.
export { CLIPTextConfig } from './clip_text_config.js';
export {
  CLIPTextModel,
  CLIPTextModelWithProjection,
  CLIPTextTransformer,
  CLIPTextEmbeddings,
  type CLIPTextCallOptions,
  type CLIPTextOutput,
  type CLIPTextWithProjectionOutput,
} from './clip_text_model.js';
export { CLIPEncoder, CLIPEncoderLayer, CLIPMLP } from './clip_encoder.js';
export { CLIPAttention } from './clip_attention.js';
export { clipTpPlan, clipParallelPlan } from './clip_plans.js';
