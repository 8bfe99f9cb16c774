// The options of fromPretrained, as transformers and transformers.js name them (camelCase).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkOptions, invalidParameter } from '@dtorch/common';
import type { RepoOptions } from '@dtorch/external';

export interface FromPretrainedOptions extends RepoOptions {
  /** The folder of the repository holding this component (a diffusers pipeline's 'text_encoder'). */
  subfolder?: string;
  /** Where the parameters live; default one CPU device. A 'tp' dim splits layers, 'dp' the batch. */
  mesh?: dt.DeviceMesh;
  /** The parameters' dtype; default the config's `dtype` / `torch_dtype`, else float32. */
  dtype?: dt.DType;
}

const repoOptionNames = ['revision', 'cacheDir', 'localFilesOnly', 'token', 'hubUrl', 'onProgress'] as const;

/**
 * Checks an options object: only `known` names (a misspelt option is an error, not silently
 * ignored) with values of the right kind.
 */
export function checkPretrainedOptions<T extends object>(what: string, options: unknown, known: readonly string[]): Partial<T> {
  const o = checkOptions<T>(`${what} options`, options) as Record<string, unknown>;
  const names = [...repoOptionNames, ...known];
  for (const key of Object.keys(o)) {
    if (!names.includes(key)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: unknown option "${key}"; the options are ${names.join(', ')}`);
    }
  }
  for (const key of ['subfolder', 'revision', 'cacheDir', 'token', 'hubUrl']) {
    if (o[key] !== undefined && typeof o[key] !== 'string') throw invalidParameter(`${what} ${key}`, 'string', o[key]);
  }
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
export function repoOptions(options: FromPretrainedOptions): RepoOptions {
  return Object.fromEntries(Object.entries(options).filter(([k]) => (repoOptionNames as readonly string[]).includes(k))) as RepoOptions;
}
