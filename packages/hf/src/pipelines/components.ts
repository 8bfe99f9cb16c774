// A pipeline's components, each in the folder model_index.json names it by: loaded from a
// pipeline folder or hub id (fromPretrained) or made with random weights (tiny()), the classes
// taken from the registry. One table per pipeline says which component each constructor
// option is, the classes it may be, where it lives (text encoders on textEncoderMesh) and
// whether a pipeline may leave it out. Components load in parallel, are checked against the
// table with one error form, and when one fails, those made are freed.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { checkPretrainedOptions, checkQuantization, repoOptions, type Quantization, type SourceOptions } from '../loading/options.js';
import { PreTrainedModel } from '../loading/pretrained_model.js';
import { registered, registry, type RegisteredModelName, type RegisteredSchedulerName, type TinyPipelineOptions } from '../registry.js';
import { AutoTokenizer } from '../tokenizers/auto_tokenizer.js';
import type { PipelineOptions } from './diffusion_pipeline.js';
import { componentClass, fetchModelIndex, parseModelIndex, type ModelIndex } from './model_index.js';
import { randomModel, tinyPipelineSpec } from './tiny/tiny_spec.js';
import { tinyTokenizer } from './tiny/tiny_tokenizers.js';

/** One component of a pipeline. */
export interface ComponentSpec {
  /** Its folder, model_index.json's key ('text_encoder_2'). */
  readonly folder: string;
  /** The classes it may be, as model_index.json spells them; none for a tokenizer (AutoTokenizer reads its folder's config). */
  readonly classes?: readonly (RegisteredModelName | RegisteredSchedulerName)[];
  /** A text encoder: it lives on the text encoders' mesh. */
  readonly textEncoder?: boolean;
  /** The pipeline works without it (a folder may save it as null, or leave it out). */
  readonly optional?: boolean;
}

/** A pipeline's components: each constructor option's component. */
export type ComponentTable<Components> = { readonly [K in keyof Components]-?: ComponentSpec };

// where the components go
interface Placement {
  mesh: dt.DeviceMesh;
  textEncoderMesh: dt.DeviceMesh;
  dtype: dt.DType | undefined;
  quantize: (folder: string) => Quantization | undefined;
}

/**
 * The components of the pipeline saved at `source` (a folder or hub id) whose model_index.json
 * must name one of `pipelines` (the classes of the same components: a family's text-to-image
 * and its variants), as the constructor takes them; `what` names the call.
 */
export async function loadComponents<Components>(what: string, pipelines: readonly string[], table: ComponentTable<Components>, source: string, options: PipelineOptions | undefined): Promise<Components> {
  const o = checkPretrainedOptions<PipelineOptions>(what, options, ['mesh', 'dtype', 'textEncoderMesh', 'quantize']);
  const where = placement(what, o, table);
  const index = await fetchModelIndex(what, source, o);
  const pipeline = pipelines[0]!;
  if (!pipelines.includes(index.className)) {
    throw new DTorchError(ErrorCode.BadConfig, `${what}: ${source} is a ${index.className}, not a ${pipelines.join(' or ')}; load it with DiffusionPipeline.fromPretrained or its own class`);
  }
  const repo = repoOptions(o);
  return makeAll(table, index, (spec, cls) => {
    const from: SourceOptions = { ...repo, subfolder: spec.folder };
    if (!cls) return AutoTokenizer.fromPretrained(source, from);
    const scheduler = registered(registry.schedulers, cls);
    if (scheduler) return scheduler.fromPretrained(source, from);
    const quantize = where.quantize(spec.folder);
    return registry.models[cls]!.model.fromPretrained(source, { ...from, ...meshOf(spec, where), ...(quantize ? { quantize } : {}) }); // a class the table allows
  }, { what, source, pipeline });
}

/**
 * The components of built-in tiny pipeline `name` (assets/tiny-pipelines/<name>.json: its
 * model_index.json, configs and weight seeds): random weights, the tiny tokenizers.
 */
export async function tinyComponents<Components>(what: string, name: string, table: ComponentTable<Components>, options: TinyPipelineOptions | undefined): Promise<Components> {
  const o = checkKnownOptions<TinyPipelineOptions>(`${what} options`, options, ['mesh', 'textEncoderMesh', 'dtype', 'quantize']);
  const where = placement(what, o, table);
  const spec = tinyPipelineSpec(name);
  const index = parseModelIndex(spec.model_index, `assets/tiny-pipelines/${name}.json`);
  return makeAll(table, index, (part, cls) => {
    if (!cls) return tinyTokenizer(spec.tokenizers[part.folder]!);
    const config = spec[part.folder]!;
    const scheduler = registered(registry.schedulers, cls);
    if (scheduler) return scheduler.fromConfig(config);
    const entry = registry.models[cls]!;
    const model = randomModel(() => new entry.model(entry.config.fromDict(config) as never, meshOf(part, where)), spec.seeds[part.folder]!, { initialize: entry.initialize ?? false });
    const quantize = where.quantize(part.folder);
    if (quantize && model instanceof PreTrainedModel) model.quantize(quantize);
    return model;
  }, { what, source: name, pipeline: index.className });
}

// the meshes, dtype and quantization of `o`, checked against the components of `table`
function placement<Components>(what: string, o: Partial<TinyPipelineOptions>, table: ComponentTable<Components>): Placement {
  for (const key of ['mesh', 'textEncoderMesh'] as const) if (o[key] !== undefined && !(o[key] instanceof dt.DeviceMesh)) throw invalidParameter(`${what} ${key}`, 'DeviceMesh', o[key]);
  if (o.dtype !== undefined) dt.checkDtype(o.dtype, `${what} dtype`);
  const mesh = o.mesh ?? dt.defaultMesh();
  return { mesh, textEncoderMesh: o.textEncoderMesh ?? mesh, dtype: o.dtype, quantize: quantizationOf(what, o.quantize, table) };
}

// Each component's quantization: a string for the transformer alone (the largest model, what
// diffusers users quantize first), or one per model_index.json name.
function quantizationOf<Components>(what: string, value: unknown, table: ComponentTable<Components>): (folder: string) => Quantization | undefined {
  if (value === undefined) return () => undefined;
  if (typeof value === 'string') {
    const q = checkQuantization(`${what} quantize`, value);
    return (folder) => (folder === 'transformer' ? q : undefined);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidParameter(`${what} quantize`, "'fp8' or { <component>: 'fp8' }", value);
  const models = (Object.values(table) as ComponentSpec[]).filter((s) => s.classes && !s.folder.startsWith('scheduler')).map((s) => s.folder);
  const byFolder = new Map<string, Quantization>();
  for (const [folder, q] of Object.entries(value)) {
    if (!models.includes(folder)) throw new DTorchError(ErrorCode.InvalidArgument, `${what} quantize: "${folder}" is not one of this pipeline's models (${models.join(', ')})`);
    byFolder.set(folder, checkQuantization(`${what} quantize.${folder}`, q));
  }
  return (folder) => byFolder.get(folder);
}

function meshOf(spec: ComponentSpec, where: Placement): { mesh: dt.DeviceMesh; dtype?: dt.DType } {
  return { mesh: spec.textEncoder ? where.textEncoderMesh : where.mesh, ...(where.dtype ? { dtype: where.dtype } : {}) };
}

/**
 * Every component of `table` that `index` lists, checked against the table, then made by `make`
 * (given its spec, and its class unless it is a tokenizer) all at once; when one fails, those
 * made are freed and the first failure (in table order) is thrown.
 */
async function makeAll<Components>(
  table: ComponentTable<Components>,
  index: ModelIndex,
  make: (spec: ComponentSpec, cls: string | undefined) => Promise<unknown> | unknown,
  at: { what: string; source: string; pipeline: string },
): Promise<Components> {
  const parts = (Object.entries(table) as [string, ComponentSpec][])
    .filter(([, spec]) => !spec.optional || index.components[spec.folder])
    .map(([option, spec]) => ({ option, spec, cls: componentClass(index, spec.folder, at.what) }));
  for (const { spec, cls } of parts) {
    if (spec.classes && !(spec.classes as readonly string[]).includes(cls)) {
      throw new DTorchError(ErrorCode.BadConfig, `${at.what}: ${at.source}'s ${spec.folder} is a ${cls}; ${at.pipeline} takes ${spec.classes.join(' or ')}`);
    }
  }
  const made = await Promise.allSettled(parts.map(async ({ spec, cls }) => make(spec, spec.classes ? cls : undefined)));
  const failed = made.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    for (const r of made) if (r.status === 'fulfilled' && r.value instanceof nn.Module) r.value.dispose();
    throw failed.reason;
  }
  return Object.fromEntries(parts.map(({ option }, i) => [option, (made[i] as PromiseFulfilledResult<unknown>).value])) as Components;
}
