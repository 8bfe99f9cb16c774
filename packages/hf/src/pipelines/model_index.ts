// A diffusers pipeline folder's model_index.json: the pipeline class and, for each component
// (transformer, vae, text_encoder, tokenizer_2, scheduler, ...), the library and class saved
// under the folder of that name ([null, null] for an optional component left out).
import { DTorchError, ErrorCode } from '@dtorch/common';
import { openRepo } from '@dtorch/external';
import { readJsonFile, type JsonObject } from '../configs/config_file.js';
import { repoOptions, type SourceOptions } from '../loading/options.js';

/** A pipeline folder's model_index.json, as readModelIndex reads it. */
export interface ModelIndex {
  /** The pipeline class, e.g. 'FluxPipeline', 'StableDiffusion3Pipeline'. */
  readonly className: string;
  /** Component name to [library, class], or null when the pipeline was saved without it. */
  readonly components: Readonly<Record<string, readonly [string, string] | null>>;
}

/** The model_index.json at `path`; a file that is not one is a BAD_CONFIG error naming what is wrong. */
export function readModelIndex(path: string): ModelIndex {
  return parseModelIndex(readJsonFile(path) as JsonObject, path);
}

/** model_index.json's contents (read from `where`) as a ModelIndex. */
export function parseModelIndex(json: JsonObject, where: string): ModelIndex {
  const className = json['_class_name'];
  if (typeof className !== 'string' || !className) {
    throw new DTorchError(ErrorCode.BadConfig, `${where}: model_index.json has no _class_name (the pipeline class); is it a diffusers pipeline folder?`);
  }
  const components: Record<string, readonly [string, string] | null> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name.startsWith('_')) continue;
    if (value === null || (Array.isArray(value) && value.every((v) => v === null))) components[name] = null;
    else if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string')) components[name] = [value[0] as string, value[1] as string];
    // other keys (flags such as requires_safety_checker) are pipeline settings, not components
  }
  return { className, components };
}

/** The class of component `name`, or a NOT_FOUND error naming the components there are. */
export function componentClass(index: ModelIndex, name: string, where: string): string {
  const entry = index.components[name];
  if (!entry) {
    const present = Object.entries(index.components).filter(([, v]) => v).map(([k]) => k);
    throw new DTorchError(ErrorCode.NotFound, `${where}: ${index.className} has no ${name} component (it has ${present.join(', ') || 'none'})`);
  }
  return entry[1];
}

/** The model_index.json of `source` (a folder or hub id), or a NOT_FOUND error saying it is not a pipeline. */
export async function fetchModelIndex(what: string, source: string, options: SourceOptions): Promise<ModelIndex> {
  const repo = await openRepo(source, repoOptions(options));
  if (!repo.has('model_index.json')) {
    throw new DTorchError(ErrorCode.NotFound, `${what}: ${repo.description} has no model_index.json; give a diffusers pipeline folder or hub id (one model alone loads with its class's fromPretrained)`);
  }
  const [path] = await repo.fetch(['model_index.json']);
  return readModelIndex(path!);
}
