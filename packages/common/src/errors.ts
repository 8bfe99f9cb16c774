// DTorchError: the one error type of the library. `code` is stable and matches the native
// codes (native/common/error.h); the message says what was wrong and how to fix it.

export const ErrorCode = {
  InvalidArgument: 'INVALID_ARGUMENT',
  ShapeMismatch: 'SHAPE_MISMATCH',
  DtypeMismatch: 'DTYPE_MISMATCH',
  UnknownDtype: 'UNKNOWN_DTYPE',
  UnknownOp: 'UNKNOWN_OP',
  PlacementMismatch: 'PLACEMENT_MISMATCH',
  MeshMismatch: 'MESH_MISMATCH',
  InvalidMesh: 'INVALID_MESH',
  Disposed: 'TENSOR_DISPOSED',
  KernelFailed: 'KERNEL_FAILED',
  Timeout: 'TIMEOUT',
  Shutdown: 'ENGINE_SHUT_DOWN',
  NativeMissing: 'NATIVE_ADDON_MISSING',
  BadFile: 'BAD_FILE',
  /** A config file with a missing required key or a value of the wrong type. */
  BadConfig: 'BAD_CONFIG',
  /** A file or repository that does not exist (a local folder, the HF cache, or the hub's 404). */
  NotFound: 'NOT_FOUND',
  /** The hub refused access (401/403): a gated or private repository, or a bad token. */
  AccessDenied: 'ACCESS_DENIED',
  /** The hub could not be reached, or answered with an unexpected status. */
  Network: 'NETWORK_ERROR',
  Internal: 'INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class DTorchError extends Error {
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

export function isDTorchError(value: unknown, code?: ErrorCode): value is DTorchError {
  return value instanceof DTorchError && (code === undefined || value.code === code);
}
