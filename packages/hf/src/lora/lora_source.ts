// Where a LoRA file comes from, as diffusers' lora_state_dict finds it: a .safetensors file on
// this machine, or a folder or hub repository holding one (weightName names it; else the one
// .safetensors file at its top, or pytorch_lora_weights.safetensors, diffusers' own name for
// what save_lora_weights writes, when there are several).
import { existsSync, statSync } from 'node:fs';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { openRepo, type RepoOptions } from '@dtorch/external';
import { readLoraFile, type LoraFile } from './lora_state_dict.js';

/** The name diffusers' save_lora_weights gives the file. */
export const DEFAULT_LORA_WEIGHT_NAME = 'pytorch_lora_weights.safetensors';

/**
 * The LoRA file at `source`: a `.safetensors` path, or a folder or hub id holding it (`weightName`
 * inside it, else found as diffusers finds it), read into host memory.
 */
export async function fetchLoraFile(what: string, source: string, weightName: string | undefined, repoOptions: RepoOptions): Promise<LoraFile> {
  if (typeof source !== 'string' || source.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give the LoRA as a .safetensors file, a folder or a hub id, got ${JSON.stringify(source)}`);
  if (weightName !== undefined && (typeof weightName !== 'string' || weightName === '')) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: weightName must be a file name inside the folder or repository, got ${JSON.stringify(weightName)}`);
  if (existsSync(source) && statSync(source).isFile()) {
    if (weightName !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${source} is a file; weightName names a file inside a folder or hub repository, so give one or the other`);
    return readLoraFile(checkSafetensors(what, source));
  }
  if (source.endsWith('.safetensors')) throw new DTorchError(ErrorCode.NotFound, `${what}: there is no file ${source}; give the path of a LoRA .safetensors file, or a folder or hub id with weightName`);
  const repo = await openRepo(source, repoOptions);
  const name = weightName ?? guessWeightName(what, repo.description, repo.list());
  if (!repo.has(name)) {
    const found = repo.list().filter((f) => f.endsWith('.safetensors'));
    throw new DTorchError(ErrorCode.NotFound, `${what}: ${repo.description} has no ${name}${found.length ? `; it has ${found.join(', ')}` : ' and no .safetensors file'}`);
  }
  const [path] = await repo.fetch([checkSafetensors(what, name)]);
  return readLoraFile(path!);
}

// diffusers' _best_guess_weight_name: the .safetensors files at the top, leaving out what
// training scripts keep beside the LoRA (schedulers', optimizers' and checkpoints' states)
function guessWeightName(what: string, description: string, files: readonly string[]): string {
  const candidates = files.filter((f) => !f.includes('/') && f.endsWith('.safetensors') && !/scheduler|optimizer|checkpoint/.test(f));
  if (candidates.includes(DEFAULT_LORA_WEIGHT_NAME)) return DEFAULT_LORA_WEIGHT_NAME;
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length === 0) throw new DTorchError(ErrorCode.NotFound, `${what}: ${description} has no .safetensors file at its top; pass weightName with the file's path inside it`);
  throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${description} has several LoRA files (${candidates.join(', ')}); pass weightName to say which`);
}

function checkSafetensors(what: string, path: string): string {
  if (!path.endsWith('.safetensors')) throw new DTorchError(ErrorCode.BadFile, `${what}: ${path} is not a .safetensors file; DTorch reads LoRAs in the safetensors format (convert a .bin or .pt with safetensors' save_file)`);
  return path;
}
