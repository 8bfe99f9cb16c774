// @dtorch/api: the user-facing library (`import * as dt from '@dtorch/api'`).
export { Tensor, isTensor, type Scalar, type NestedArray } from './tensor.js';
export { DeviceMesh, defaultMesh, initDeviceMesh } from './device_mesh.js';
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
  type ReduceOp,
} from './placement.js';
export { checkDtype, dtypeNames, type DType } from './dtype.js';
export { tidy, keep, dispose, memory, sync, workers, resetPeakMemory, setCaptureStacks } from './scope.js';
export {
  tensor,
  zeros,
  ones,
  empty,
  full,
  arange,
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
} from './ops/creation.js';
export { add, sub, mul, div, neg, abs, relu, exp, log, sqrt, sigmoid, tanh } from './ops/elementwise.js';
export { matmul } from './ops/matmul.js';
export { sum, mean } from './ops/reduction.js';
export { redistribute, explainRedistribute, toLocal, localShape, localShapes, visualizeSharding } from './ops/redistribute.js';
export { to } from './ops/cast.js';
export { DTorchError, ErrorCode, isDTorchError } from '@dtorch/common';
export { torchInfo, describeRuntime } from '@dtorch/external';
