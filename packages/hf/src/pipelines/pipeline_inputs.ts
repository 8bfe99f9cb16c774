// generate()'s inputs as every pipeline checks them (a misspelt option or a bad prompt is an
// error at the user's call): its options, prompts as lists, image sizes against what the VAE and
// the patching need, scales, tensors given in place of prompts or noise, the batch against the
// mesh's 'dp' dim, and the initial latents drawn as diffusers draws them
// (torch.Generator("cpu").manual_seed(seed)).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, describeValue, invalidParameter } from '@dtorch/common';
import type { GenerateOptions } from './diffusion_pipeline.js';
import { outputTypes } from './image_output.js';

/** generate()'s options, holding only `known` names; onStep, outputType, signal and loraScale checked. */
export function checkGenerateOptions<T extends GenerateOptions>(what: string, options: unknown, known: readonly string[]): Partial<T> {
  const o = checkKnownOptions<T>(`${what} options`, options, known);
  if (o.onStep !== undefined && typeof o.onStep !== 'function') throw invalidParameter(`${what} onStep`, 'function', o.onStep);
  if (o.outputType !== undefined && !outputTypes.includes(o.outputType)) throw invalidParameter(`${what} outputType`, outputTypes.map((t) => `'${t}'`).join(', '), o.outputType);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalidParameter(`${what} signal`, 'AbortSignal', o.signal);
  if (o.loraScale !== undefined && (typeof o.loraScale !== 'number' || !Number.isFinite(o.loraScale))) throw invalidParameter(`${what} loraScale`, 'finite number', o.loraScale);
  return o;
}

/** A prompt option (string or array of strings) as a list, or undefined when not given. */
export function promptList(what: string, name: string, value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.length > 0 && value.every((p) => typeof p === 'string')) return [...value] as string[];
  throw invalidParameter(`${what} ${name}`, 'a string or a non-empty array of strings', value);
}

/**
 * `value` (a prompt list of one, or of `batch`) as `batch` prompts: one prompt is used for every
 * row, a list must have one per row.
 */
export function promptsFor(what: string, name: string, value: string[], batch: number): string[] {
  if (value.length === batch) return value;
  if (value.length === 1) return Array.from({ length: batch }, () => value[0]!);
  throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${name} has ${value.length} prompts but the batch ${batch}; give one, or one per prompt`);
}

/** numImagesPerPrompt, default 1. */
export function imagesPerPrompt(what: string, value: unknown): number {
  return value === undefined ? 1 : checkInteger(`${what} numImagesPerPrompt`, value, 1);
}

/** `rows` (a prompt's embeddings, batch first) with each row repeated `n` times in place, as diffusers' repeat/view. */
export function repeatPerPrompt(rows: dt.Tensor, n: number): dt.Tensor {
  return n === 1 ? rows : rows.repeatInterleave(n, 0);
}

/** height and width as positive multiples of `multiple` (what the VAE and the patching need), or a clear error. */
export function checkImageSize(what: string, height: unknown, width: unknown, multiple: number): { height: number; width: number } {
  const h = checkInteger(`${what} height`, height, 1);
  const w = checkInteger(`${what} width`, width, 1);
  if (h % multiple !== 0 || w % multiple !== 0) {
    const round = (x: number) => Math.max(multiple, Math.round(x / multiple) * multiple);
    throw new DTorchError(
      ErrorCode.InvalidArgument,
      `${what}: height and width must be multiples of ${multiple} (the VAE's scale factor times the patch size), got ${w}x${h} (width x height); e.g. ${round(w)}x${round(h)}`,
    );
  }
  return { height: h, width: w };
}

// float32's largest finite value
const FLOAT32_MAX = 3.4028234663852886e38;

/**
 * A guidance scale: a finite number that float32 holds (guidance is float32 math or narrower:
 * a larger scale overflows to infinity and the image to NaN); else INVALID_ARGUMENT naming `name`.
 */
export function checkScale(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || Math.abs(value) > FLOAT32_MAX) {
    throw invalidParameter(name, `a finite number within float32's range (magnitude at most ${FLOAT32_MAX})`, value);
  }
  return value;
}

/** A batch-first tensor option of generate() (promptEmbeds, latents): a Tensor of `ndim` dims, or a clear error. */
export function tensorOption(what: string, name: string, value: unknown, ndim: number): dt.Tensor {
  if (!(value instanceof dt.Tensor)) throw invalidParameter(`${what} ${name}`, `a Tensor of ${ndim} dims`, value);
  if (value.isDisposed) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${name} has been disposed`);
  if (value.ndim !== ndim) throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${name} must have ${ndim} dims (batch first), got ${value.describe()}`);
  return value;
}

/** Placements of a batch-first tensor of `batch` rows: Shard(0) on 'dp' where the rows divide evenly, Replicate elsewhere. */
export function dpPlacements(mesh: dt.DeviceMesh, batch: number): dt.Placement[] {
  return mesh.shape.map((size, d) => (mesh.dimNames?.[d] === 'dp' && batch % size === 0 ? dt.Shard(0) : dt.Replicate()));
}

/** A clear error unless the mesh's 'dp' dims divide `batch` (the denoiser splits its batch over them). */
export function checkDpDivides(what: string, mesh: dt.DeviceMesh, batch: number, rows: string): void {
  const dp = mesh.shape.reduce((n, size, d) => (mesh.dimNames?.[d] === 'dp' ? n * size : n), 1);
  if (batch % dp !== 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: the mesh's 'dp' dim (${dp}) splits the batch, but the batch is ${batch} (${rows}); give a multiple of ${dp} prompts or images per prompt, or a mesh without 'dp'`);
  }
}

/**
 * Standard normal latents of `shape` drawn as diffusers' randn_tensor with
 * torch.Generator("cpu").manual_seed(seed) (DTorch's randn is that generator): in float32, then
 * cast to `dtype` (torch.randn in bfloat16 on the CPU gives the same values); on `mesh` with the
 * batch split over 'dp' where the rows divide, the same values on every mesh. No seed: a fresh one.
 */
export function initialLatents(what: string, shape: readonly number[], seed: unknown, mesh: dt.DeviceMesh, dtype: dt.DType): dt.Tensor {
  if (seed !== undefined) checkInteger(`${what} seed`, seed, 0, 2 ** 48 - 1);
  return dt.tidy(() => {
    const draw = dt.randn(shape, { seed: seed as number | undefined, mesh, dtype: 'float32' });
    return (dtype === 'float32' ? draw : draw.to(dtype)).redistribute(dpPlacements(mesh, shape[0] ?? 1));
  });
}

/** A short description of a prompt for messages (long ones cut). */
export function describePrompt(prompt: string): string {
  return describeValue(prompt.length > 60 ? `${prompt.slice(0, 57)}...` : prompt);
}
