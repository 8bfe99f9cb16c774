// `--lora path-or-id[:scale]` of `dtorch generate`: a LoRA file, a folder or hub id holding one, or
// a file inside a hub repository ("org/name/sub/file.safetensors"), with the weight it runs at
// (default 1). Parsed when commander reads the flag (one line and exit code 1 for a bad one); the
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
  /** The adapter's name: the file's or repository's name, made unique among the flags. */
  readonly name: string;
}

/** Commander's parser of a repeated --lora: each flag appended to `previous`. */
export function parseLora(text: string, previous: LoraSpec[] = []): LoraSpec[] {
  let source = text;
  let scale = 1;
  // "path:0.8": a scale after the last ':' (a hub id and a POSIX path have none of their own)
  const colon = text.lastIndexOf(':');
  if (colon > 0 && !existsSync(text)) {
    const value = Number(text.slice(colon + 1));
    if (text.slice(colon + 1).trim() === '' || !Number.isFinite(value)) {
      throw new InvalidArgumentError(`Expected --lora PATH-OR-ID[:SCALE] with SCALE a number (0.8), but received ${JSON.stringify(text)}.`);
    }
    source = text.slice(0, colon);
    scale = value;
  }
  if (source === '') throw new InvalidArgumentError('Expected --lora PATH-OR-ID[:SCALE], but received an empty path.');
  // "org/name/file.safetensors" that is no file here: that file of hub repository org/name
  let weightName: string | undefined;
  const inRepo = /^([^./][^/]*\/[^/]+)\/(.+\.safetensors)$/.exec(source);
  if (inRepo && !existsSync(source)) [, source, weightName] = inRepo as unknown as [string, string, string];
  const stem = basename(weightName ?? source).replace(/\.safetensors$/, '').replace(/[^A-Za-z0-9_.-]/g, '_') || 'lora';
  let name = stem;
  for (let i = 2; previous.some((p) => p.name === name); i++) name = `${stem}_${i}`;
  return [...previous, { source, ...(weightName !== undefined && { weightName }), scale, name }];
}
