// A LoRA file as it is read, before it becomes tensors on a mesh: each tensor's bytes on the
// host (LoRAs are small: a Flux-dev LoRA of rank 16 on every linear is about 150 MB), so the
// layouts people share (kohya, BFL, XLabs: lora_formats.ts) can be rewritten into diffusers' keys
// by moving rows, without a device in the loop.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { SafetensorsCheckpoint, type SafetensorsDtype } from '@dtorch/external';

/** One tensor of a LoRA file: its dtype, shape and raw little-endian bytes (row-major). */
export interface LoraTensor {
  /** Its dtype as the file names it (F32, BF16, ...). */
  readonly dtype: SafetensorsDtype;
  /** Its shape. */
  readonly shape: readonly number[];
  /** Its elements, little-endian, row-major. */
  readonly bytes: Uint8Array;
}

/** A LoRA file's tensors by key, and its metadata (the safetensors header's `__metadata__`). */
export interface LoraFile {
  /** The path it was read from. */
  readonly path: string;
  /** Every tensor by its key in the file. */
  readonly tensors: Map<string, LoraTensor>;
  /** The header's `__metadata__` (diffusers writes `lora_adapter_metadata` there). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Reads every tensor of the `.safetensors` file at `path` into host memory. */
export function readLoraFile(path: string): LoraFile {
  const checkpoint = SafetensorsCheckpoint.open(path);
  try {
    const tensors = new Map<string, LoraTensor>();
    for (const [key, entry] of checkpoint.tensors) {
      const bytes = checkpoint.readRuns(key, [{ from: 0, length: entry.end - entry.begin }]);
      tensors.set(key, { dtype: entry.dtype, shape: entry.shape, bytes });
    }
    if (tensors.size === 0) throw new DTorchError(ErrorCode.BadFile, `${path}: holds no tensors; a LoRA file holds lora_A/lora_B (or lora_down/lora_up) weights`);
    return { path, tensors, metadata: checkpoint.metadata.get(path) ?? {} };
  } finally {
    checkpoint.close();
  }
}
