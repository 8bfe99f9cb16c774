// One .safetensors file in an original (non-diffusers) layout, seen by its header only: its
// tensors by key without the "model.diffusion_model." prefix that full checkpoints (ComfyUI's,
// SD3's own) put before the denoiser's keys, their shapes, and the block indices they hold.
import { existsSync, statSync } from 'node:fs';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { SafetensorsCheckpoint, type CheckpointTensor } from '@dtorch/external';

/** The prefix of the denoiser's keys in a checkpoint that holds a whole pipeline (as diffusers strips it). */
export const diffusionModelPrefix = 'model.diffusion_model.';

/** A single-file checkpoint's header: its tensors by key, the prefix left out. */
export class SingleFileCheckpoint {
  /** The file. */
  readonly path: string;
  /** "model.diffusion_model." when the file's denoiser keys have it (only those keys are kept), else ''. */
  readonly prefix: string;
  /** The tensors, by key without the prefix. */
  readonly tensors: ReadonlyMap<string, CheckpointTensor>;
  /** How many tensors lie outside the prefix (a whole pipeline's text encoders and VAE), left alone. */
  readonly otherTensors: number;

  private constructor(path: string, prefix: string, tensors: Map<string, CheckpointTensor>, otherTensors: number) {
    this.path = path;
    this.prefix = prefix;
    this.tensors = tensors;
    this.otherTensors = otherTensors;
  }

  /** Reads the header of `path`; `what` names the caller in errors. */
  static open(path: string, what: string): SingleFileCheckpoint {
    if (typeof path !== 'string' || path === '') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: expected the path of a .safetensors file, got ${typeof path === 'string' ? 'an empty string' : typeof path}`);
    if (!existsSync(path)) throw new DTorchError(ErrorCode.NotFound, `${what}: ${path} does not exist`);
    if (statSync(path).isDirectory()) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${path} is a folder; fromSingleFile reads one .safetensors file (a diffusers folder with config.json loads with fromPretrained)`);
    }
    let checkpoint: SafetensorsCheckpoint;
    try {
      checkpoint = SafetensorsCheckpoint.open(path);
    } catch (err) {
      if (!(err instanceof DTorchError) || err.code !== ErrorCode.BadFile) throw err;
      const hint = / has dtype /.test(err.message)
        ? 'DTorch reads float and integer tensors only (fp8 checkpoints are not read): use a bf16, fp16 or fp32 file'
        : 'it is not a whole safetensors file (a .ckpt / .pt pickle must be converted to safetensors first, a partial download fetched again)';
      throw new DTorchError(ErrorCode.BadFile, `${what}: ${err.message}; ${hint}`);
    }
    const all = new Map(checkpoint.tensors);
    checkpoint.close();
    const prefixed = [...all.keys()].some((k) => k.startsWith(diffusionModelPrefix));
    const prefix = prefixed ? diffusionModelPrefix : '';
    const tensors = new Map<string, CheckpointTensor>();
    for (const [key, entry] of all) if (key.startsWith(prefix)) tensors.set(key.slice(prefix.length), entry);
    return new SingleFileCheckpoint(path, prefix, tensors, all.size - tensors.size);
  }

  /** Whether the file has `key` (without the prefix). */
  has(key: string): boolean {
    return this.tensors.has(key);
  }

  /** The shape of `key`; BAD_FILE naming the key when the file lacks it. */
  shape(key: string): readonly number[] {
    const entry = this.tensors.get(key);
    if (!entry) throw this.lacks([key]);
    return entry.shape;
  }

  /** The BAD_FILE error for keys the file lacks. */
  lacks(keys: readonly string[]): DTorchError {
    const list = keys.slice(0, 6).map((k) => `"${this.prefix}${k}"`).join(', ') + (keys.length > 6 ? `, ... (${keys.length} in all)` : '');
    return new DTorchError(ErrorCode.BadFile, `${this.path}: has no tensor ${list}; the file is incomplete (fetch it again) or not of this layout`);
  }

  /** The indices N of keys `<blocks>.N.*` (e.g. "double_blocks"), ascending. */
  blockIndices(blocks: string): number[] {
    const found = new Set<number>();
    const head = `${blocks}.`;
    for (const key of this.tensors.keys()) {
      if (!key.startsWith(head)) continue;
      const index = /^(\d+)\./.exec(key.slice(head.length));
      if (index) found.add(Number(index[1]));
    }
    return [...found].sort((a, b) => a - b);
  }

  /** How many blocks `<blocks>.N` there are: the largest N plus one (as diffusers counts them); 0 for none. */
  blockCount(blocks: string): number {
    const indices = this.blockIndices(blocks);
    return indices.length ? indices[indices.length - 1]! + 1 : 0;
  }
}
