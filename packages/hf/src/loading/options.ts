// The options of fromPretrained, as transformers and transformers.js name them (camelCase).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { REPO_OPTION_NAMES, type RepoOptions } from '@dtorch/external';

/** Where a component's files are: the repository and the folder inside it. */
export interface SourceOptions extends RepoOptions {
  /** The folder of the repository holding this component (a diffusers pipeline's 'text_encoder', 'tokenizer_2'). */
  subfolder?: string;
}

/** The options of a model's fromPretrained: where the files are, and the mesh and dtype to load onto. */
export interface FromPretrainedOptions extends SourceOptions {
  /** Where the parameters live; default one CPU device. A 'tp' dim splits layers, 'dp' the batch. */
  mesh?: dt.DeviceMesh;
  /** The parameters' dtype; default the config's `dtype` / `torch_dtype`, else float32. */
  dtype?: dt.DType;
  /** 'fp8': the blocks' linears quantized to FP8 weights on load (PreTrainedModel.quantize). */
  quantize?: Quantization;
}

/** A weight quantization: 'fp8' (float8_e4m3fn weights with one scale per output row, per-token FP8 activations). */
export type Quantization = 'fp8';

/** `value` as a {@link Quantization}, or an error naming `what` and the kinds there are. */
export function checkQuantization(what: string, value: unknown): Quantization {
  if (value === 'fp8') return value;
  throw new DTorchError(ErrorCode.InvalidArgument, `${what}: unknown quantization ${JSON.stringify(value)}; the one there is: 'fp8'`);
}

/**
 * Checks the options of a fromPretrained: the repository options, `subfolder` and `known` (a
 * misspelt option is an error, not silently ignored), each of the right kind.
 */
export function checkPretrainedOptions<T extends object>(what: string, options: unknown, known: readonly string[] = []): Partial<T> {
  const o = checkKnownOptions<T>(`${what} options`, options, [...REPO_OPTION_NAMES, 'subfolder', ...known]) as Record<string, unknown>;
  for (const key of ['subfolder', 'revision', 'cacheDir', 'token', 'hubUrl']) {
    if (o[key] === undefined || typeof o[key] === 'string') continue;
    // a token is never printed, even a wrong one
    if (key === 'token') throw new DTorchError(ErrorCode.InvalidArgument, `Expected a string for ${what} token but received a value of type ${typeof o[key]}`);
    throw invalidParameter(`${what} ${key}`, 'string', o[key]);
  }
  if (o['onProgress'] !== undefined && typeof o['onProgress'] !== 'function') throw invalidParameter(`${what} onProgress`, 'function', o['onProgress']);
  if (o['localFilesOnly'] !== undefined && typeof o['localFilesOnly'] !== 'boolean') throw invalidParameter(`${what} localFilesOnly`, 'boolean', o['localFilesOnly']);
  if (o['mesh'] !== undefined && !(o['mesh'] instanceof dt.DeviceMesh)) throw invalidParameter(`${what} mesh`, 'DeviceMesh', o['mesh']);
  if (o['dtype'] !== undefined) dt.checkDtype(o['dtype'], `${what} dtype`);
  return o as Partial<T>;
}

/** The path of `file` inside the repository, under `subfolder` when one is given. */
export function inSubfolder(subfolder: string | undefined, file: string): string {
  const folder = (subfolder ?? '').replace(/^\/+|\/+$/g, '');
  return folder ? `${folder}/${file}` : file;
}

/** The RepoOptions part of the options. */
export function repoOptions(options: SourceOptions): RepoOptions {
  return Object.fromEntries(Object.entries(options).filter(([k]) => (REPO_OPTION_NAMES as readonly string[]).includes(k))) as RepoOptions;
}
