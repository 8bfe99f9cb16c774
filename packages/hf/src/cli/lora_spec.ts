// `--lora [name=]path-or-id[:scale]` of `dtorch generate` and `dtorch serve`: a LoRA file, a folder
// or hub id holding one, or a file inside a hub repository ("org/name/sub/file.safetensors"), with
// the weight it runs at (default 1), as the adapter `name` (default the file's or repository's
// name; `dtorch serve`'s requests choose adapters by it). Parsed when commander reads the flag (one line and exit code 1 for a bad one); the
// files are read only once the pipeline has loaded.
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { InvalidArgumentError } from 'commander';

/** One --lora flag. */
export interface LoraSpec {
  /** A .safetensors file, a folder, or a hub id. */
  readonly source: string;
  /** The file inside a hub repository, when the flag named one. */
  readonly weightName?: string;
  /** The adapter's weight (setAdapters), default 1. */
  readonly scale: number;
  /** The adapter's name: the flag's `name=`, else the file's or repository's name made unique among the flags. */
  readonly name: string;
}

/** Commander's parser of a repeated --lora: each flag appended to `previous`. */
export function parseLora(text: string, previous: LoraSpec[] = []): LoraSpec[] {
  let source = text;
  let scale = 1;
  // "style=path": the adapter's name before the first '=' (a hub id has none; a path that exists is a path)
  let given: string | undefined;
  const named = /^([^=/:\\]*)=(.*)$/s.exec(text);
  if (named && !existsSync(text)) {
    [, given, source] = named as unknown as [string, string, string];
    if (!/^[A-Za-z0-9_.-]{1,128}$/.test(given)) throw new InvalidArgumentError(`Expected --lora NAME=PATH-OR-ID[:SCALE] with NAME of letters, digits, '_', '.' or '-' (at most 128), but received ${JSON.stringify(text)}.`);
    if (previous.some((p) => p.name === given)) throw new InvalidArgumentError(`--lora ${text}: another --lora is named "${given}" already; give each adapter its own name.`);
  }
  const rest = source;
  // "path:0.8": a scale after the last ':' (a hub id and a POSIX path have none of their own)
  const colon = rest.lastIndexOf(':');
  if (colon > 0 && !existsSync(rest)) {
    const value = Number(rest.slice(colon + 1));
    if (rest.slice(colon + 1).trim() === '' || !Number.isFinite(value)) {
      throw new InvalidArgumentError(`Expected --lora PATH-OR-ID[:SCALE] with SCALE a number (0.8), but received ${JSON.stringify(text)}.`);
    }
    source = rest.slice(0, colon);
    scale = value;
  }
  if (source === '') throw new InvalidArgumentError('Expected --lora PATH-OR-ID[:SCALE], but received an empty path.');
  // "org/name/file.safetensors" that is no file here: that file of hub repository org/name
  let weightName: string | undefined;
  const inRepo = /^([^./][^/]*\/[^/]+)\/(.+\.safetensors)$/.exec(source);
  if (inRepo && !existsSync(source)) [, source, weightName] = inRepo as unknown as [string, string, string];
  const stem = basename(weightName ?? source).replace(/\.safetensors$/, '').replace(/[^A-Za-z0-9_.-]/g, '_') || 'lora';
  let name = given ?? stem;
  for (let i = 2; given === undefined && previous.some((p) => p.name === name); i++) name = `${stem}_${i}`;
  return [...previous, { source, ...(weightName !== undefined && { weightName }), scale, name }];
}
