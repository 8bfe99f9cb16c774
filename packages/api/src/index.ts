// For TypeScript consumers: these declarations use Node's types (Buffer) and Disposable (a Tensor
// works with `using`), whatever the consumer's `types` and `lib`; @types/node is the one thing to install.
/// <reference types="node" preserve="true" />
/// <reference lib="esnext.disposable" preserve="true" />
// @dtorch/api: the user-facing library (`import * as dt from '@dtorch/api'`).
export { Tensor, isTensor, type Scalar, type NestedArray } from './tensor.js';
export { DeviceMesh, defaultMesh, initDeviceMesh } from './device_mesh.js';
/** The `devices` argument of `new DeviceMesh(...)`: a device index or arrays of them nested one level per mesh dim. */
export type { Nested } from './device_mesh.js';
export {
  Shard,
  Replicate,
  Partial,
  Placement,
  ShardPlacement,
  ReplicatePlacement,
  PartialPlacement,
  formatPlacements,
  normalizePlacements,
  placementFromCode,
  type ReduceOp,
} from './placement.js';
export { bytesPerElement, checkDtype, dtypeNames, type DType } from './dtype.js';
export { tidy, keep, dispose, memory, sync, workers, nativeSettings, resetPeakMemory, setCaptureStacks } from './scope.js';
export {
  tensor,
  fromBuffer,
  fromLocalBuffers,
  localPieceOf,
  zeros,
  ones,
  empty,
  full,
  arange,
  eye,
  rand,
  randn,
  randint,
  manualSeed,
  zerosLike,
  onesLike,
  fullLike,
  randnLike,
  type CreationOptions,
  type RandomOptions,
  type TensorOptions,
  type LocalBuffersOptions,
  type LocalPiece,
} from './ops/creation.js';
export {
  add, sub, mul, div, pow, minimum, maximum, eq, ne, lt, le, gt, ge, logicalAnd, logicalOr, logicalNot,
  where, maskedFill, clamp, neg, abs, relu, square, floor, round, exp, log, log2, sqrt, rsqrt, reciprocal,
  sin, cos, tanh, sigmoid, silu, gelu, quickGelu, isnan, isinf,
} from './ops/elementwise.js';
/** A binary op's operand: a Tensor, or a JS number or boolean taken as a Python scalar. */
export type { Operand } from './ops/elementwise.js';
export { outer, einsum } from './ops/nn.js';
export * as functional from './functional.js';
export * as F from './functional.js';
/** A size per spatial dim of the image ops (F.conv2d, F.avgPool2d, ...): one number for both H and W, or [h, w]. */
export type { Pair } from './ops/image.js';
/** The options of F.layerNorm and F.groupNorm: an optional affine weight and bias, and eps. */
export type { NormOptions } from './ops/nn.js';
export { matmul } from './ops/matmul.js';
export { sum, mean, any, all, max, min, argmax, softmax, logSoftmax, type ValuesIndices } from './ops/reduction.js';
export { redistribute, explainRedistribute, toLocal, localShape, localShapes, visualizeSharding } from './ops/redistribute.js';
export { to } from './ops/cast.js';
export {
  reshape, view, flatten, unflatten, squeeze, unsqueeze, permute, transpose, expand, contiguous, clone, cat, stack,
  split, chunk, unbind, joinShards, splitShards, sliceAlong, narrow, indexSelect, repeat, repeatInterleave, pad, slice, get, set, Slice, type Index,
} from './ops/shape.js';
export { DTorchError, ErrorCode, isDTorchError } from '@dtorch/common';
export { torchInfo, describeRuntime, dtorchVersion } from '@dtorch/external';
export * as cuda from './cuda.js';
/** One program, several hosts: the main node's control plane (start, devices, barrier, shutdown). */
export * as cluster from './cluster.js';
export * as graph from './graph.js';
