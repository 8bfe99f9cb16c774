// fromSingleFile, as diffusers' from_single_file: a model from one checkpoint file in its
// original layout (BFL's flux1-dev.safetensors, SD3's sd3_medium.safetensors, ComfyUI's copies
// with the "model.diffusion_model." prefix). A layout says how to recognise its files, the config
// their shapes give and where each diffusers key lies in them; the lifecycle here is
// fromPretrained's: build without initial values, load, pack, and free the model on a failure.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkKnownOptions, invalidParameter } from '@dtorch/common';
import type { JsonObject } from '../../configs/config_file.js';
import type { ModelOptions } from '../pretrained_model.js';
import { sourceKeys, type ConversionPlan } from './conversion_plan.js';
import { loadConverted } from './load_converted.js';
import { SingleFileCheckpoint } from './single_file_checkpoint.js';

/** The options of fromSingleFile: the mesh and dtype to load onto (as fromPretrained's), and the config when the file's shapes do not fix it. */
export interface FromSingleFileOptions {
  /** Where the parameters live; default one CPU device. A 'tp' dim splits layers, 'dp' the batch. */
  mesh?: dt.DeviceMesh;
  /** The parameters' dtype; default the config's `torch_dtype`, else float32 (as diffusers). */
  dtype?: dt.DType;
  /**
   * The model's config as its config.json holds it (diffusers' snake_case keys, e.g.
   * `{ axes_dims_rope: [16, 56, 56] }`). Its keys win over what is read from the file, but sizes
   * the file's shapes fix (layer counts, widths) must agree with it. Default: all from the file.
   */
  config?: JsonObject;
}

/** How one original layout maps onto a diffusers model with config `C`. */
export interface SingleFileLayout<C> {
  /** As messages name it. */
  readonly name: string;
  /** A key that every file of the layout holds (without the prefix), as diffusers' CHECKPOINT_KEY_NAMES. */
  readonly signature: string;
  /** The model's config: the file's shapes, then `given` (options.config) over them; BAD_CONFIG where they disagree (`what` names the caller). */
  config(file: SingleFileCheckpoint, given: JsonObject, what: string): C;
  /** diffusers key -> where it lies in the file, for a model of `config`. */
  plan(file: SingleFileCheckpoint, config: C): ConversionPlan;
}

/** A model class fromSingleFile builds: its constructor from a config, and its name. */
export interface SingleFileModelClass<M, C> {
  new (config: C, options?: ModelOptions): M;
  readonly name: string;
}

/** What fromSingleFile needs of the model it builds. */
export type SingleFileModel = nn.Module & { packProjections(): number };

/** The layouts fromSingleFile knows (or that people mistake for one), by a key their files hold, and what loads each. */
const knownLayouts: readonly { keys: readonly string[]; what: string }[] = [
  { keys: ['double_blocks.0.img_attn.norm.key_norm.scale'], what: "a FLUX.1 transformer in BFL's layout: load it with FluxTransformer2DModel.fromSingleFile" },
  { keys: ['joint_blocks.0.context_block.adaLN_modulation.1.bias'], what: "an SD3 transformer in its original layout: load it with SD3Transformer2DModel.fromSingleFile" },
  { keys: ['single_transformer_blocks.0.proj_mlp.weight'], what: "a Flux transformer in diffusers' layout: put it in a folder beside its config.json and load it with FluxTransformer2DModel.fromPretrained" },
  { keys: ['pos_embed.proj.weight', 'transformer_blocks.0.attn.to_q.weight'], what: "an SD3 transformer in diffusers' layout: put it in a folder beside its config.json and load it with SD3Transformer2DModel.fromPretrained" },
];

/** The config of `path`'s model as `layout` reads it (and `given` overrides), without loading. */
export function singleFileConfig<C>(layout: SingleFileLayout<C>, what: string, path: string, given: unknown = {}): C {
  const file = SingleFileCheckpoint.open(path, what);
  checkLayout(file, layout, what);
  return layout.config(file, checkConfig(what, given), what);
}

/**
 * The model of class `cls` from the single file `path` in `layout`, on `options.mesh` in
 * `options.dtype`: built without initial values, loaded (each rank reading only its slice of
 * each tensor, split tensors as row slices), its projections packed, as fromPretrained gives it.
 */
export async function fromSingleFile<M extends SingleFileModel, C extends { dtype?: dt.DType | undefined }>(
  cls: SingleFileModelClass<M, C>, layout: SingleFileLayout<C>, path: string, options?: FromSingleFileOptions,
): Promise<M> {
  const what = `${cls.name}.fromSingleFile`;
  const o = checkKnownOptions<FromSingleFileOptions>(`${what} options`, options, ['mesh', 'dtype', 'config']);
  if (o.mesh !== undefined && !(o.mesh instanceof dt.DeviceMesh)) throw invalidParameter(`${what} mesh`, 'DeviceMesh', o.mesh);
  if (o.dtype !== undefined) dt.checkDtype(o.dtype, `${what} dtype`);
  const given = checkConfig(what, o.config ?? {});
  const file = SingleFileCheckpoint.open(path, what);
  checkLayout(file, layout, what);
  const config = layout.config(file, given, what);
  const plan = layout.plan(file, config);
  const lacking = [...new Set([...plan.values()].flatMap(sourceKeys))].filter((k) => !file.has(k));
  if (lacking.length) throw file.lacks(lacking);
  const dtype = o.dtype ?? config.dtype ?? 'float32';
  // the config may not ask for more parameters than the file can fill (a wrong options.config
  // would otherwise build until memory ran out); twice the file leaves room for layers that
  // parallelize makes anew on a mesh
  const held = [...file.tensors.values()].reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0);
  const tooLarge = () => new DTorchError(ErrorCode.BadConfig, `${what}: the config asks for more than ${2 * held} parameters, but ${path} holds ${held}: check options.config`);
  const model = nn.skipInit(() => new cls(config, { mesh: o.mesh ?? dt.defaultMesh(), dtype }), { maxElements: 2 * held, tooLarge });
  try {
    await loadConverted(model, file, plan, what);
    model.packProjections();
  } catch (err) {
    model.dispose();
    throw err;
  }
  return model;
}

// options.config: a plain object of config.json's keys
function checkConfig(what: string, config: unknown): JsonObject {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw invalidParameter(`${what} config`, "an object of config.json's keys", config);
  return config as JsonObject;
}

// The file is of `layout`, else a BAD_FILE that says what it looks like and what loads it.
function checkLayout(file: SingleFileCheckpoint, layout: SingleFileLayout<unknown>, what: string): void {
  if (file.has(layout.signature)) return;
  const known = knownLayouts.find((l) => l.keys.every((k) => file.has(k)));
  const keys = [...file.tensors.keys()];
  const looksLike = known
    ? `it looks like ${known.what}`
    : keys.some((k) => /lora_(A|B|up|down)\b/.test(k))
      ? 'it looks like a LoRA adapter: load it into a pipeline with loadLoraWeights'
      : `its keys are of no layout known here (${keys.slice(0, 3).map((k) => `"${file.prefix}${k}"`).join(', ') || 'none'}${keys.length > 3 ? ', ...' : ''})`;
  throw new DTorchError(ErrorCode.BadFile, `${what}: ${file.path} is not ${layout.name} (it has no "${layout.signature}", with or without the "model.diffusion_model." prefix); ${looksLike}`);
}

/**
 * Checks that the config built from the file and options.config agrees with the file's shapes:
 * each entry is [config.json key, the config's value, the file's value, where the file says so].
 */
export function checkAgrees(file: SingleFileCheckpoint, what: string, checks: readonly (readonly [string, unknown, unknown, string])[]): void {
  for (const [key, configured, measured, where] of checks) {
    if (JSON.stringify(configured) === JSON.stringify(measured)) continue;
    throw new DTorchError(
      ErrorCode.BadConfig,
      `${what}: options.config gives ${key} ${JSON.stringify(configured)}, but ${file.path} has ${JSON.stringify(measured)} (${where}); leave ${key} out (it is read from the file) or use the file the config belongs to`,
    );
  }
}
