// The diffusion transformers' adaptive layer norms (diffusers' normalization.py).
export {
  AdaLayerNormChunks,
  AdaLayerNormZero,
  AdaLayerNormZeroSingle,
  AdaLayerNormContinuous,
  type AdaLayerNormContinuousOptions,
} from './ada_layer_norm.js';
