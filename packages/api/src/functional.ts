// dt.functional (also dt.F): the neural-network ops, as torch.nn.functional names them.
export { relu, silu, gelu, quickGelu, sigmoid, tanh } from './ops/elementwise.js';
export { softmax, logSoftmax } from './ops/reduction.js';
export { pad } from './ops/shape.js';
export { conv2d, interpolate, avgPool2d, maxPool2d, type Conv2dOptions, type InterpolateOptions, type PoolOptions } from './ops/image.js';
export {
  linear, layerNorm, rmsNorm, groupNorm, embedding, scaledDotProductAttention, applyRotaryEmb, type AttentionOptions,
} from './ops/nn.js';
export { allGatherLinear, linearReduceScatter, type OverlappedLinearOptions } from './ops/overlapped_linear.js';
