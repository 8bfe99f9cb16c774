// The typed contract of the addon's core slice (native/bindings/core_binding.cpp).

/** One op of the native registry, as {@link CoreSlice.ops} lists it by name. */
export interface OpInfo {
  /** The op's code, what record() takes; fixed for a build, not across builds. */
  code: number;
  /** Tensor inputs; -1 for any number. */
  numInputs: number;
  /** Attribute layout, as the native op documents it. */
  attrs: string;
}

/** A read's result as the native side hands it over, before it becomes a {@link HostArray}. */
export interface Fetched {
  /** Native dtype code of the tensor read. */
  dtype: number;
  /** Row-major bytes; float16/bfloat16 arrive as float32. */
  buffer: ArrayBuffer;
}

/** The memory of one device's worker, as {@link MemoryInfo.perDevice} lists it. */
export interface DeviceMemoryInfo {
  /** The device, e.g. `'cuda:0'` or `'cpu:3'`. */
  device: string;
  /** Live tensors with a part on this device. */
  numTensors: number;
  /** Their bytes on this device. */
  numBytes: number;
  /** Bytes the device's worker holds right now (frees run after queued work). */
  allocatedBytes: number;
  /** Highest allocatedBytes since resetPeakMemory(). */
  peakBytes: number;
  /** Device memory the worker's CUDA graphs hold (their pool and input buffers); 0 on CPU devices. */
  graphBytes: number;
}

/** One placement signature row of an op, for one mesh dim (placement wire codes). */
export interface SignatureRowInfo {
  /** Each input's placement code: Shard(d) is d, Replicate -1, Partial -2 and below. */
  inputs: number[];
  /** The output's placement code for these inputs. */
  output: number;
  /** Bit k: input k may also be Replicate, sliced locally. */
  slice: number;
}

/** Where one rank's piece of a tensor lives. */
export interface PieceInfo {
  /** The device that holds it, e.g. `'cuda:1'`. */
  device: string;
  /** The piece's local shape (the full shape, for a replicated or partial tensor). */
  shape: number[];
  /** Offset of the piece in the full tensor, per dim. */
  offset: number[];
}

/** One worker thread of the engine, one per device a mesh has named, for diagnostics. */
export interface WorkerInfo {
  /** The device it runs on, e.g. `'cuda:0'` or `'cpu:0'`. */
  device: string;
  /** Intra-op threads LibTorch uses on this worker's thread (0 before it ran anything). */
  intraOpThreads: number;
  /** Compute kernels run so far (nodes the controller found dead never run). */
  kernelsRun: number;
}

/** What the engine holds, as TF.js's `tf.memory()` reports it: live tensors and their bytes, per device too. */
export interface MemoryInfo {
  /** Live tensors: recorded and not yet released. */
  numTensors: number;
  /** Their logical bytes: the full shape's, however the tensor is split over devices. */
  numBytes: number;
  /** One entry per worker's device. */
  perDevice: DeviceMemoryInfo[];
}

/** The typed arrays that carry tensor data between JS and the engine; int64 is a BigInt64Array. */
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
  /** DTORCH_CPU_DEVICES: how many CPU devices (worker threads) meshes may name, 1 to 1024 (default 64). */
  cpuDevices: number;
  /** 0: unset (cores / CPU workers). */
  intraOpThreads: number;
  /** DTORCH_COLLECTIVE_TIMEOUT_MS: how long a collective waits for its group before it fails with TIMEOUT (default 600000). */
  collectiveTimeoutMs: number;
  /** DTORCH_CUDA_BATCHES_IN_FLIGHT: segments a GPU worker may have queued on its GPU before it waits, 0 to 1024 (default 4). */
  cudaBatchesInFlight: number;
  /** DTORCH_GRAPH_COPY_LIMIT_MB: a span of GPU work whose CUDA graph would copy more than this many MiB in and out per replay runs kernel by kernel, 0 to 65536 (default 16). */
  graphCopyLimitMb: number;
  /** DTORCH_REPLAY_SEGMENT_NODES: a compiled call's copy (dt.graph.compile) is handed to the devices in segments of up to this many nodes, 1 to 1000000 (default 16384). */
  replaySegmentNodes: number;
  /** DTORCH_REPLAY_HEAD_NODES: a compiled call's copy of at least this many compute nodes hands its first part (a quarter to a half of them, cut where the fewest bytes cross) to the devices first, so they start on it while the rest is copied; 0 never, up to 1000000 (default 64). */
  replayHeadNodes: number;
  /** DTORCH_NCCL: collectives between GPUs through NCCL; false: they meet in shared memory and copy (default true). */
  nccl: boolean;
  /** DTORCH_COPY_ENGINES: all-gather and all-to-all between GPUs by copy-engine pulls rather than NCCL (default true). */
  copyEngines: boolean;
  /** DTORCH_COPY_ENGINE_REDUCTIONS: GPU reductions and ring passes by copy-engine pulls too, not NCCL (default false). */
  copyEngineReductions: boolean;
  /** DTORCH_FUSION: producer-consumer fusion of recorded ops in the controller (default true). */
  fusion: boolean;
  /** DTORCH_GRAPHS: the controller recognises segments it has seen before (default true). */
  graphs: boolean;
  /** DTORCH_RMS_NORM_KERNEL: `rmsNorm` on GPUs through DTorch's row kernel rather than LibTorch's ops (default true). */
  rmsNormKernel: boolean;
  /** DTORCH_SCALAR_OP_KERNEL: a small GPU tensor plus or times a scalar through DTorch's kernel rather than LibTorch's (default true). */
  scalarOpKernel: boolean;
  /** DTORCH_ROTARY_KERNEL: `applyRotaryEmb` on GPUs in DTorch's one-pass kernel rather than LibTorch's separate ones (default true). */
  rotaryKernel: boolean;
  /** DTORCH_LORA_JOIN: an unfused LoRA adapter's `[x | A x]` as the fused `lora_join` op (whose buffer the modulated norm before it writes into on GPUs) rather than a linear and a cat, and one join for a Flux single block's q/k/v and proj_mlp adapters (default true). */
  loraJoin: boolean;
  /** DTORCH_LORA_TALL: an unfused LoRA adapter on a linear that does not widen (in ≥ out) runs its A x as extra output rows of the base weight (`[W; A]`, one matmul reading x once), then adds B (A x) into the output in place, rather than reading x again for A x (default true). */
  loraTall: boolean;
  /** DTORCH_MATMUL_TUNING: on GPUs, a linear's cuBLASLt kernel is chosen by timing the heuristic's candidates once per shape rather than taken from the heuristic (default false until GPU runs have shown it). */
  matmulTuning: boolean;
  /** DTORCH_CONV_CHANNELS_LAST: on GPUs, 16-bit convolutions read and write channels last, the layout cuDNN's fast kernels take (default false until GPU runs have shown it). */
  convChannelsLast: boolean;
}

/**
 * The addon's core slice: the native engine's recorder, reads and diagnostics, called only from
 * the JS thread through {@link Engine}, which adds the checks and the call sites.
 */
export interface CoreSlice {
  /** Shared argument buffer: input ids, then attributes (the first one; growArgs replaces it). */
  args: Float64Array;
  /** Shared result buffer: [seq, nOut, per output: id, dtype, ndim, shape..., nPlacements, placements...]. */
  out: Float64Array;
  /** The args buffer with room for `n` values, what was written so far kept. */
  growArgs(n: number): Float64Array;
  /**
   * Records op `code` with `numInputs` ids then `numAttrs` attributes from `args`; writes the
   * outputs' metadata to `out`, and returns the grown `out` when they needed more room, else undefined.
   */
  record(code: number, numInputs: number, numAttrs: number): Float64Array | undefined;
  /** Like record, for an op whose value is `data` (copied now), given as `sourceDtype`'s code. */
  recordData(code: number, numAttrs: number, data: HostArray, sourceDtype: number): Float64Array | undefined;
  /** Records a redistribute of `id` to `placementCodes` on mesh `meshId`, its own or another (returns as record). */
  redistribute(id: number, meshId: number, placementCodes: number[]): Float64Array | undefined;
  /** Each rank's piece of tensor `id`: device, shape and offset. */
  layout(id: number): PieceInfo[];
  /** The steps (e.g. all-gather, local slice) a redistribute of `id` to `placementCodes` on its mesh would take. */
  planRedistribute(id: number, placementCodes: number[]): string[];
  /** The placement rows op `code` has for the inputs and attributes in `args`; records nothing. */
  signatureRows(code: number, numInputs: number, numAttrs: number): SignatureRowInfo[];
  /** Drops the engine's reference to tensor `id`; its memory is freed once queued work that reads it ran. A no-op after shutdown. */
  release(id: number): void;
  /** Hands the open segment to the controller, to run on the workers. Never throws for a segment that fails: its reads do. */
  flush(): void;
  /** Resolves with the full value of `id` once computed; rejects with the error of the op that failed. */
  fetch(id: number): Promise<Fetched>;
  /** Blocks the JS thread until the value of `id` is computed; TIMEOUT after `timeoutMs`. */
  fetchSync(id: number, timeoutMs: number): Fetched;
  /** Resolves when every worker has run everything recorded so far. */
  sync(): Promise<unknown>;
  /** Creates a mesh of `kind` (0 cpu, 1 cuda) over `devices` in row-major `shape` and returns its id; INVALID_MESH when they do not fit. */
  createMesh(kind: number, devices: number[], shape: number[]): number;
  /** The op table of this build, by op name. */
  ops(): Record<string, OpInfo>;
  /** The engine's error codes (native/common/error.h), as a DTorchError from native code carries them. */
  errorCodes(): string[];
  /** The native dtype codes, by dtype name ('float32', 'bfloat16', ...). */
  dtypes(): Record<string, number>;
  /** Live tensors and their bytes, in all and per device. */
  memory(): MemoryInfo;
  /** The engine's worker threads, one per device in use. */
  workers(): WorkerInfo[];
  /** Starts each device's {@link DeviceMemoryInfo.peakBytes} again from what it holds now. */
  resetPeakMemory(): void;
  /** Nodes a segment reaches before it is flushed (DTORCH_SEGMENT_NODES); INVALID_ARGUMENT outside 1 to 1,000,000. */
  setFlushThreshold(nodes: number): void;
  /** This process's native settings; throws INVALID_ARGUMENT naming a malformed one. */
  settings(): NativeSettings;
  /** Stops the engine (workers wait for their GPUs and free their tensors); idempotent. */
  shutdown(): void;
  /** The settings the given environment would give (tests). */
  settingsFrom(env: Record<string, string>): NativeSettings;
  /** Bounds the collective waits that start from now on; 0: DTORCH_COLLECTIVE_TIMEOUT_MS again. */
  setCollectiveTimeout(ms: number): void;
  /** What the controller recognised of the segments it lowered (dt.graph.stats). */
  graphStats(): GraphStats;
  /** Recognising and replaying repeated segments on or off. */
  setGraphs(on: boolean): void;
  /** The start or end of a step of a loop (dt.graph.step): flushes, and the next segment starts small again. */
  beginStep(): void;
  /** The start of a top-level model call: a step boundary when the previous call was large (64 nodes or more). */
  beginCall(): void;
  /** Keeps what is recorded from now on, for endTrace (a compiled call's first run). */
  beginTrace(): void;
  /** Ends the open trace of a call on the argument ids then output ids in `args`: the trace's id, or why it cannot be copied. */
  endTrace(nArguments: number, nOutputs: number): number | string;
  /** Drops the open trace (the call threw). */
  abortTrace(): void;
  /** Records trace `id` again on the argument ids in `args`: false when they do not fit it; else `args` holds [first seq, n, output ids...]. */
  replayTrace(id: number, nArguments: number): boolean;
  /** Forgets trace `id`. */
  dropTrace(id: number): void;
  /** The next hand-over of a segment to the controller fails with `message` (tests). */
  failNextFlush(message: string): void;
  /** This engine's side of a cluster (native/bindings/cluster_binding.cpp). */
  cluster: ClusterSlice;
}

/** What the controller recognised of the segments it lowered, since the engine started. */
export interface GraphStats {
  /** Segments lowered. */
  segments: number;
  /** Their nodes. */
  nodes: number;
  /** Segments recognised as one lowered before (the same ops, shapes, placements and meshes, inputs in the same roles). */
  repeats: number;
  /** Their nodes. */
  repeatedNodes: number;
  /** Distinct segments remembered now (at most 512, the most recent). */
  distinct: number;
  /** Repeated segments the controller lowered by reusing the kernels it queued for them before, on every device kind. */
  reusedLowerings: number;
  /** CUDA graphs captured, all GPU workers together (a span of a repeated segment, captured on its second run). */
  captured: number;
  /** Spans run from a CUDA graph with one launch (each capture's own first run included). */
  replays: number;
  /** Their compute kernels. */
  replayedKernels: number;
  /** Captures that failed (the span then runs kernel by kernel for good). */
  fallbacks: number;
  /** Device memory the live graphs hold: their memory pool's growth and their input buffers. */
  graphBytes: number;
  /** Graphs alive now. */
  liveGraphs: number;
  /** Whether repeated segments are recognised and replayed now (DTORCH_GRAPHS, dt.graph.setEnabled). */
  enabled: boolean;
}

/** A device of a cluster as the engine numbers it: `index` is what a mesh names, per kind. */
export interface ClusterDeviceEntry {
  /** 'cpu' or 'cuda'. */
  kind: 'cpu' | 'cuda';
  /** The cluster-wide index of its kind: node 0's devices first, then each worker's in join order. */
  index: number;
  /** The node that holds it (0: the main program). */
  node: number;
  /** Its index on that node's host. */
  localIndex: number;
}

/** The engine's cluster calls: joining, the op stream's payloads in and out, lost nodes. */
export interface ClusterSlice {
  /**
   * Joins as node `node` (0: the main program) with the devices known so far; `onOutgoing` runs
   * when payloads wait in the outbox; `glooHost` is the address this node's Gloo groups bind
   * and give their peers ('' for c10d's choice).
   */
  join(node: number, epoch: number, storeHandle: number | undefined, devices: ClusterDeviceEntry[], onOutgoing: () => void, glooHost: string): void;
  /** The payloads posted since the last call, in order. */
  takeOutgoing(): Buffer[];
  /** The main node: a worker's devices (streamed to the workers already there). */
  addDevices(devices: ClusterDeviceEntry[]): void;
  /** The main node: what a worker that joins now needs first (every device, every mesh). */
  snapshot(): Buffer[];
  /** A worker: applies one payload of the main node; PROTOCOL_ERROR (nothing applied) when it does not fit. */
  apply(payload: Buffer): void;
  /** The main node: one payload of worker `node` (a read's value, a sync, a refusal). */
  answer(node: number, payload: Buffer): void;
  /** The main node: `node` is gone; every wait on another node fails with NODE_LOST and `message`. */
  nodeLost(node: number, message: string): void;
  /** Leaves the cluster; waits on other nodes fail with `message`. */
  leave(message: string): void;
  /** Checks a payload without applying it (fuzz tests): its type and node count. */
  decode(payload: Buffer): {
    /** The payload's message type (docs/cluster.md, "The op stream: payloads"). */
    type: number;
    /** Nodes of a segment; 0 for other types. */
    nodes: number;
  };
  /** What the main node waits for from other nodes. */
  stats(): {
    /** Reads and syncs waiting for another node's answer. */
    remoteWaits: number;
  };
}
