// Sharded safetensors checkpoints: `<name>.safetensors.index.json` maps each tensor name to the
// shard file that holds it (`weight_map`), as transformers' save_pretrained writes them.
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize } from 'node:path';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** A sharded checkpoint's `*.safetensors.index.json`, checked, with shard paths made absolute. */
export interface SafetensorsIndex {
  /** The index file it was read from. */
  path: string;
  /** Tensor name -> absolute path of its shard. */
  weightMap: Map<string, string>;
  /** The shard files, in order of first appearance. */
  files: string[];
  /** The index's `metadata` object (transformers writes `total_size`); empty when it has none. */
  metadata: Record<string, unknown>;
}

function bad(path: string, reason: string): DTorchError {
  return new DTorchError(ErrorCode.BadFile, `${path}: not a valid safetensors index: ${reason}`);
}

/** Reads and checks an index file; the shards themselves are not opened. */
export function readSafetensorsIndex(path: string): SafetensorsIndex {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new DTorchError(ErrorCode.BadFile, `${path}: cannot open: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw bad(path, `it is not JSON (${(err as Error).message})`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw bad(path, 'it is not a JSON object');
  const { weight_map: map, metadata } = json as { weight_map?: unknown; metadata?: unknown };
  if (map === null || typeof map !== 'object' || Array.isArray(map)) throw bad(path, 'it has no "weight_map" object (tensor name -> shard file)');
  if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw bad(path, '"metadata" must be an object');
  }
  const weightMap = new Map<string, string>();
  const files: string[] = [];
  for (const [name, file] of Object.entries(map as Record<string, unknown>)) {
    // shards sit beside the index: a plain relative name, never a path that leaves its folder
    if (typeof file !== 'string' || file.length === 0 || isAbsolute(file) || normalize(file).startsWith('..')) {
      throw bad(path, `weight_map["${name}"] is ${JSON.stringify(file)}; expected a shard file name relative to the index`);
    }
    const shard = join(dirname(path), file);
    if (!files.includes(shard)) files.push(shard);
    weightMap.set(name, shard);
  }
  return { path, weightMap, files, metadata: (metadata as Record<string, unknown> | undefined) ?? {} };
}
