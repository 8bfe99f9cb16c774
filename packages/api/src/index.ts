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
// The ops, one file per family (ops/*.ts): whatever a family file exports is public, so a new
// op is exported where it is written. The Tensor methods are written from the same functions
// (scripts/gen-tensor-methods.mjs), and dt.F (functional.ts) takes the torch.nn.functional ones.
export * from './ops/creation.js';
export { Generator, type RandomDraw } from './generator.js';
export * from './ops/elementwise.js';
export * from './ops/activation.js';
export * from './ops/linalg.js';
export * from './ops/reduction.js';
export * from './ops/cast.js';
export * from './ops/shape.js';
export * from './ops/redistribute.js';
/** A size per spatial dim of the image ops (F.conv2d, F.avgPool2d, ...): one number for both H and W, or [h, w]. */
export type { Pair } from './ops/image.js';
/** The options of F.layerNorm and F.groupNorm: an optional affine weight and bias, and eps. */
export type { NormOptions, RotaryOptions } from './ops/nn.js';
export * as functional from './functional.js';
export * as F from './functional.js';
export { DTorchError, ErrorCode, isDTorchError } from '@dtorch/common';
export { torchInfo, describeRuntime, dtorchVersion } from '@dtorch/external';
export * as cuda from './cuda.js';
/** One program, several hosts: the main node's control plane (start, devices, barrier, shutdown). */
export * as cluster from './cluster.js';
export * as graph from './graph.js';
