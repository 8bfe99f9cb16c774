// The typed contract of the addon's core slice (native/bindings/core_binding.cpp).

export interface OpInfo {
  code: number;
  /** Tensor inputs; -1 for any number. */
  numInputs: number;
  /** Attribute layout, as the native op documents it. */
  attrs: string;
}

export interface Fetched {
  /** Native dtype code of the tensor read. */
  dtype: number;
  /** Row-major bytes; float16/bfloat16 arrive as float32. */
  buffer: ArrayBuffer;
}

export interface DeviceMemoryInfo {
  device: string;
  /** Live tensors with a part on this device. */
  numTensors: number;
  /** Their bytes on this device. */
  numBytes: number;
  /** Bytes the device's worker holds right now (frees run after queued work). */
  allocatedBytes: number;
  /** Highest allocatedBytes since resetPeakMemory(). */
  peakBytes: number;
}

/** One placement signature row of an op, for one mesh dim (placement wire codes). */
export interface SignatureRowInfo {
  inputs: number[];
  output: number;
  /** Bit k: input k may also be Replicate, sliced locally. */
  slice: number;
}

/** Where one rank's piece of a tensor lives. */
export interface PieceInfo {
  device: string;
  shape: number[];
  /** Offset of the piece in the full tensor, per dim. */
  offset: number[];
}

export interface WorkerInfo {
  device: string;
  /** Intra-op threads LibTorch uses on this worker's thread (0 before it ran anything). */
  intraOpThreads: number;
  /** Compute kernels run so far (nodes the controller found dead never run). */
  kernelsRun: number;
}

export interface MemoryInfo {
  numTensors: number;
  numBytes: number;
  perDevice: DeviceMemoryInfo[];
}

export type HostArray =
  | Float32Array
  | Float64Array
  | Int32Array
  | Int16Array
  | Int8Array
  | Uint8Array
  | BigInt64Array;

/** The engine's settings from the environment (native/common/env.h), as parsed. */
export interface NativeSettings {
  cpuDevices: number;
  /** 0: unset (cores / CPU workers). */
  intraOpThreads: number;
  collectiveTimeoutMs: number;
  cudaBatchesInFlight: number;
  nccl: boolean;
  copyEngines: boolean;
  copyEngineReductions: boolean;
  fusion: boolean;
  rmsNormKernel: boolean;
  scalarOpKernel: boolean;
  rotaryKernel: boolean;
}

export interface CoreSlice {
  /** Shared argument buffer: input ids, then attributes (the first one; growArgs replaces it). */
  args: Float64Array;
  /** Shared result buffer: [seq, nOut, per output: id, dtype, ndim, shape..., nPlacements, placements...]. */
  out: Float64Array;
  /** The args buffer with room for `n` values, what was written so far kept. */
  growArgs(n: number): Float64Array;
  // Each record returns the grown `out` when the outputs needed more room, else undefined.
  record(code: number, numInputs: number, numAttrs: number): Float64Array | undefined;
  recordData(code: number, numAttrs: number, data: HostArray, sourceDtype: number): Float64Array | undefined;
  redistribute(id: number, meshId: number, placementCodes: number[]): Float64Array | undefined;
  layout(id: number): PieceInfo[];
  planRedistribute(id: number, placementCodes: number[]): string[];
  signatureRows(code: number, numInputs: number, numAttrs: number): SignatureRowInfo[];
  release(id: number): void;
  flush(): void;
  fetch(id: number): Promise<Fetched>;
  fetchSync(id: number, timeoutMs: number): Fetched;
  sync(): Promise<unknown>;
  createMesh(kind: number, devices: number[], shape: number[]): number;
  ops(): Record<string, OpInfo>;
  dtypes(): Record<string, number>;
  memory(): MemoryInfo;
  workers(): WorkerInfo[];
  resetPeakMemory(): void;
  setFlushThreshold(nodes: number): void;
  /** This process's native settings; throws INVALID_ARGUMENT naming a malformed one. */
  settings(): NativeSettings;
  /** Stops the engine (workers wait for their GPUs and free their tensors); idempotent. */
  shutdown(): void;
  /** The settings the given environment would give (tests). */
  settingsFrom(env: Record<string, string>): NativeSettings;
  /** Bounds the collective waits that start from now on; 0: DTORCH_COLLECTIVE_TIMEOUT_MS again. */
  setCollectiveTimeout(ms: number): void;
  /** The next hand-over of a segment to the controller fails with `message` (tests). */
  failNextFlush(message: string): void;
}
