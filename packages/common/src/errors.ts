// DTorchError: the one error type of the library. `code` is stable and matches the native
// codes (native/common/error.h); the message says what was wrong and how to fix it.

/**
 * The stable error codes a {@link DTorchError} carries as `code`, keyed by a readable name. The
 * values match the native engine's (native/common/error.h), so a test or a caller can branch on
 * `err.code === ErrorCode.ShapeMismatch` whichever side threw.
 */
export const ErrorCode = {
  /** An argument of the wrong type or out of range, an unknown option, or an environment variable that cannot work. */
  InvalidArgument: 'INVALID_ARGUMENT',
  /** Shapes that do not fit the op: operands that do not broadcast, a matmul's inner sizes, data of the wrong length for a shape. */
  ShapeMismatch: 'SHAPE_MISMATCH',
  /** A dtype the op does not take (a bool tensor where numbers are needed, an integer input to a floating op); the message says what to cast to. */
  DtypeMismatch: 'DTYPE_MISMATCH',
  /** A dtype name this build does not know (not one of float32, bfloat16, int64, ...); the message lists the known names. */
  UnknownDtype: 'UNKNOWN_DTYPE',
  /** An op name or code that the native engine of this build does not register. */
  UnknownOp: 'UNKNOWN_OP',
  /** Placements (Shard, Replicate, Partial) that do not fit the tensor or the op: the wrong count for the mesh, a sharded dim the tensor lacks, a layout no op signature takes. */
  PlacementMismatch: 'PLACEMENT_MISMATCH',
  /** Operands on different device meshes (as DTensor's same-mesh rule), or a move between meshes that span several nodes of a cluster. */
  MeshMismatch: 'MESH_MISMATCH',
  /** A device mesh that cannot be built or used: no devices, a repeated device, a shape that does not hold the devices, an unknown mesh dim, or a size a model cannot be split over. */
  InvalidMesh: 'INVALID_MESH',
  /** A tensor used after `dispose()` (or after the engine released it), or a pipeline used after its `dispose()` (a `generate` still queued then rejects with it). */
  Disposed: 'TENSOR_DISPOSED',
  /** Recorded work that failed when it ran (a LibTorch or NCCL error); `op` and `seq` name the node. Reads that depend on it throw the same. */
  KernelFailed: 'KERNEL_FAILED',
  /** A wait that ran out: `dataSync()` past DTORCH_READ_TIMEOUT_MS, or a copy or collective between GPUs past its timeout. */
  Timeout: 'TIMEOUT',
  /** Work recorded or read after the engine shut down, as the Node environment exits. */
  Shutdown: 'ENGINE_SHUT_DOWN',
  /** The native addon (dtorch.node) could not be loaded; the message lists each path tried, why it failed and how to fix it. */
  NativeMissing: 'NATIVE_ADDON_MISSING',
  /** A file that is not what it should be: a truncated or malformed safetensors file, invalid tokenizer JSON, a checkpoint lacking a model's weights. */
  BadFile: 'BAD_FILE',
  /** A config file with a missing required key or a value of the wrong type. */
  BadConfig: 'BAD_CONFIG',
  /** A file or repository that does not exist (a local folder, the HF cache, or the hub's 404). */
  NotFound: 'NOT_FOUND',
  /** The hub refused access (401/403): a gated or private repository, or a bad token. */
  AccessDenied: 'ACCESS_DENIED',
  /** The hub could not be reached, or answered with an unexpected status. */
  Network: 'NETWORK_ERROR',
  /** A worker node of the cluster was lost (killed, cut off, or silent past its heartbeat deadline); the message names it. */
  NodeLost: 'NODE_LOST',
  /** A cluster message that is malformed, truncated, replayed or of another DTorch version; the message says what is wrong. */
  Protocol: 'PROTOCOL_ERROR',
  /** A call its caller cancelled: a pipeline's generate() whose `signal` was aborted, stopped between denoising steps. */
  Cancelled: 'CANCELLED',
  /** A bug in DTorch rather than in the caller's input (an unexpected native exception, a broken invariant); worth reporting. */
  Internal: 'INTERNAL',
} as const;

/** One of {@link ErrorCode}'s values, e.g. `'INVALID_ARGUMENT'`: the type of {@link DTorchError.code}. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The one error type the library throws, from TypeScript and from the native engine alike. `code`
 * is stable and meant for branching; `message` says what was wrong and how to fix it.
 */
export class DTorchError extends Error {
  /** The machine-readable error code, one of {@link ErrorCode}'s values, e.g. `'SHAPE_MISMATCH'`. */
  readonly code: ErrorCode;
  /** Op whose kernel failed, for KERNEL_FAILED. */
  op?: string;
  /** Record sequence number of the failed node, for KERNEL_FAILED. */
  seq?: number;

  // (code, message): the native engine builds errors through this same constructor.
  constructor(code: ErrorCode | string, message: string) {
    super(message);
    this.name = 'DTorchError';
    this.code = code as ErrorCode;
  }
}

/** Whether `value` is a {@link DTorchError}, and when `code` is given, one with that code. */
export function isDTorchError(value: unknown, code?: ErrorCode): value is DTorchError {
  return value instanceof DTorchError && (code === undefined || value.code === code);
}
