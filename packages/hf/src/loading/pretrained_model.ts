// PreTrainedModel: the base of every model of this package, with transformers' from_pretrained:
// a local folder or hub id, its config.json (under `subfolder`), its safetensors weights
// (single or sharded), the model built without initial values on the given mesh and dtype and
// the weights loaded into it, each rank reading only its own slice of each tensor.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkKnownOptions, log } from '@dtorch/common';
import { SafetensorsCheckpoint, openRepo, type RepoFiles } from '@dtorch/external';
import { hasPackedProjections, inPackedGroup, releasePackedLora } from '../models/attention/packed_projections.js';
import type { PretrainedConfig } from '../configs/pretrained_config.js';
import { checkPretrainedOptions, checkQuantization, inSubfolder, repoOptions, type FromPretrainedOptions, type Quantization } from './options.js';
import { fetchWeights } from './weight_files.js';
import { fp8AuxiliaryKeys, prepareFp8Checkpoint } from './fp8_checkpoint.js';
import { diffusersLayoutLora, type DiffusersLora } from '../lora/lora_formats.js';
import { fetchLoraFile } from '../lora/lora_source.js';
import type { LoraFile } from '../lora/lora_state_dict.js';
import {
  addPipelineLora,
  deleteAdapters,
  enableAdapters,
  fuseAdapters,
  setAdapters,
  unfuseAdapters,
  unloadAdapters,
  type LoadLoraWeightsOptions,
  type LoraComponents,
} from '../lora/pipeline_lora.js';

/** Where a model's parameters live and their dtype (as nn layers take them). */
export interface ModelOptions {
  /** The mesh the parameters live on; default dt.defaultMesh(). */
  mesh?: dt.DeviceMesh;
  /** The parameters' dtype; a model defaults to its config's dtype, else float32. */
  dtype?: dt.DType;
}

/** A model class as fromPretrained sees it (`this`): its constructor and its statics. */
export interface PretrainedModelClass<M extends PreTrainedModel> {
  new (config: never, options?: ModelOptions): M;
  /** The class's name, as messages give it. */
  readonly name: string;
  /** Reads the model's config.json. */
  readConfig(path: string): PretrainedConfig;
  /** Other checkpoint names of the module key `key` (see {@link PreTrainedModel.keyAliases}). */
  keyAliases(key: string): readonly string[];
  /** Checkpoint keys the model lacks and skips without a warning (see {@link PreTrainedModel.ignoredCheckpointKeys}). */
  readonly ignoredCheckpointKeys: readonly RegExp[];
}

/**
 * The base of every model of this package: an nn.Module whose parameters are named as the
 * checkpoint's keys, with transformers' from_pretrained (config.json and safetensors weights, from
 * a folder or the hub, each rank reading only its own slice of each tensor).
 */
export abstract class PreTrainedModel extends nn.Module {
  /**
   * Other names a checkpoint may give the module key `key`, tried when the key itself is absent
   * (a tied weight saved under its twin's name, a prefix older or newer versions write).
   */
  static keyAliases(_key: string): readonly string[] {
    return [];
  }

  /** Checkpoint keys this model ignores without a warning (transformers' _keys_to_ignore_on_load_unexpected). */
  static readonly ignoredCheckpointKeys: readonly RegExp[] = [];

  /**
   * The model saved at `source` (a folder written by save_pretrained, or a hub id `org/name`),
   * on `options.mesh` in `options.dtype` (default the config's). Downloads only what it needs
   * into the HF cache.
   */
  static async fromPretrained<M extends PreTrainedModel>(this: PretrainedModelClass<M>, source: string, options?: FromPretrainedOptions): Promise<M> {
    const what = `${this.name}.fromPretrained`;
    const o = checkPretrainedOptions<FromPretrainedOptions>(what, options, ['mesh', 'dtype', 'quantize']);
    const quantization = o.quantize === undefined ? undefined : checkQuantization(what, o.quantize);
    const repo = await openRepo(source, repoOptions(o));
    const configFile = inSubfolder(o.subfolder, 'config.json');
    if (!repo.has(configFile)) throw new DTorchError(ErrorCode.NotFound, `${what}: ${repo.description} has no ${configFile}${missingConfigHint(repo, o.subfolder)}`);
    const [configPath] = await repo.fetch([configFile]);
    const config = this.readConfig(configPath!);
    const weights = await fetchWeights(repo, o.subfolder);
    const dtype = o.dtype ?? config.dtype ?? 'float32';
    // the config's sizes may not ask for more parameters than the weights can fill (num_layers:
    // 1e9 would build blocks until memory ran out); twice the checkpoint leaves room for tied weights
    const held = checkpointElements(weights);
    const tooLarge = () =>
      new DTorchError(ErrorCode.BadConfig, `${configPath}: its sizes ask for more than ${2 * held} parameters, but ${weights} holds ${held}: the config does not belong to these weights (check its layer counts and sizes)`);
    const model = nn.skipInit(() => new this(config as never, { mesh: o.mesh ?? dt.defaultMesh(), dtype }), { maxElements: 2 * held, tooLarge });
    try {
      await loadWeights(model, this, weights);
    } catch (err) {
      model.dispose();
      throw err;
    }
    if (quantization) model.quantize(quantization);
    model.packProjections();
    return model;
  }

  /**
   * Quantizes the model's weights in place: 'fp8' makes the linears inside its blocks FP8
   * (nn.quantizeFp8: float8_e4m3fn with one float32 scale per output row, activations quantized
   * per token as they run) by {@link fp8Linear}'s rule; their groups are packed again. Returns the
   * paths of the linears quantized.
   */
  quantize(kind: Quantization): string[] {
    checkQuantization(`${this.constructor.name}.quantize`, kind);
    const done = nn.quantizeFp8(this, { filter: (path) => this.fp8Linear(path) });
    this.packProjections();
    return done;
  }

  /**
   * Whether the linear at `path` runs in FP8 once quantized. The rule: the linears of the
   * repeated blocks (a path with a block index, `transformer_blocks.3.attn.to_q`), except the
   * adaLN modulation linears (under a `norm*` module: one row per image, where FP8 saves nothing
   * and their shifts and scales touch every value); embedders, final projections and norms stay
   * in the model's dtype, as the FP8 deployments of Flux and SD3 keep them. (Sizes that are not
   * multiples of 16 stay too: GPUs' FP8 matmuls refuse them.)
   */
  protected fp8Linear(path: string): boolean {
    const parts = path.split('.');
    return parts.some((p) => /^\d+$/.test(p)) && !parts.some((p) => p.startsWith('norm'));
  }

  /**
   * Packs the projections that read one input (each attention's q, k and v) into one buffer each,
   * so that each group runs as one matmul, as diffusers' fuse_qkv_projections, without a second
   * copy of the weights: the parameters become views of the buffer (PackedProjections).
   * fromPretrained does it; call it again after replacing weights otherwise (loadStateDict,
   * setTensor), else those groups run one linear at a time. Groups split over devices (tensor
   * parallel) stay as they are. A group needs its own size once more while it is moved (SD3's
   * adaLN linears, the largest: 1.3 GB). Linears with running LoRA adapters are laid with them
   * (nn.LinearLora.layout): beside their B where they widen (in < out), above their A otherwise.
   * Returns how many groups are packed.
   */
  packProjections(): number {
    let packed = 0;
    // every module below, nested models' too (namedModules walks them), each once
    for (const [, m] of this.namedModules()) {
      if (m instanceof PreTrainedModel) packed += m.packOwnProjections();
      else if (hasPackedProjections(m)) packed += m.packProjections();
    }
    // then the linears with LoRA adapters that run on their own: laid beside their adapters where
    // that pays (nn.LinearLora.layout), a group's members on their own
    for (const [, m] of this.namedModules()) if (m instanceof nn.Linear) nn.linearLora(m)?.layout(!inPackedGroup(m));
    return packed;
  }

  /**
   * Disposes every parameter and buffer, and what the LoRA adapters hold beside them (their
   * factors, a packed group's [W | B] buffer): nothing of the model outlives it until the GC.
   */
  override dispose(): void {
    for (const [, m] of this.namedModules()) if (m instanceof nn.Linear) releasePackedLora(m);
    nn.disposeLora(this);
    super.dispose();
  }

  /** Packs the groups the model itself owns (projections across its blocks); how many. */
  protected packOwnProjections(): number {
    return 0;
  }

  // ---- LoRA adapters of this model alone (diffusers' PeftAdapterMixin; a pipeline's own methods load into all its components) ----

  /**
   * Loads a LoRA into this model (diffusers' load_lora_adapter): `source` a `.safetensors` file, or
   * a folder or hub id holding one (`weightName`); the file's modules under `prefix` (default
   * "transformer"; keys without a component prefix count as the transformer's), as adapter
   * `adapterName`, active with weight 1 beside those active already. Returns the adapter's name.
   */
  async loadLoraAdapter(source: string, options?: LoadLoraWeightsOptions & { prefix?: string }): Promise<string> {
    const what = `${this.constructor.name}.loadLoraAdapter`;
    const o = checkPretrainedOptions<LoadLoraWeightsOptions & { prefix?: string }>(what, options, ['weightName', 'adapterName', 'strict', 'prefix']);
    if (o.strict !== undefined && typeof o.strict !== 'boolean') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: strict must be true or false, got ${JSON.stringify(o.strict)}`);
    const prefix = o.prefix ?? 'transformer';
    const file = await fetchLoraFile(what, source, o.weightName, repoOptions(o));
    const converted = this.convertLora(file);
    // the other components' modules are theirs, not this model's: left aside, as diffusers does
    const own = { ...converted, modules: new Map([...converted.modules].filter(([key]) => key.startsWith(`${prefix}.`))) };
    return addPipelineLora(what, new Map([[prefix, this]]), file, own, o.adapterName, o.strict ?? true);
  }

  /**
   * `file`'s LoRA in diffusers' module paths; diffusers' own layout unless the model converts
   * the layouts people share for it (FluxTransformer2DModel).
   * @internal
   */
  protected convertLora(file: LoraFile): DiffusersLora {
    return diffusersLayoutLora(file.path, this.constructor.name, file.tensors);
  }

  /** Makes `names` the active adapters with `weights` (one for all or one each; default 1), as diffusers' set_adapters. */
  setAdapters(names: string | readonly string[], weights?: number | readonly number[]): void {
    setAdapters(`${this.constructor.name}.setAdapters`, this.#lora(), names, weights);
  }

  /** Turns the LoRA adapters off, keeping them (diffusers' disable_lora). */
  disableLora(): void {
    enableAdapters(this.#lora(), false);
  }

  /** Turns the LoRA adapters on again (diffusers' enable_lora). */
  enableLora(): void {
    enableAdapters(this.#lora(), true);
  }

  /** Deletes adapters `names`, releasing their memory (diffusers' delete_adapters). */
  deleteAdapters(names: string | readonly string[]): void {
    deleteAdapters(`${this.constructor.name}.deleteAdapters`, this.#lora(), names);
  }

  /** Fuses the active adapters into the weights, times `loraScale` (default 1); unfuseLora() puts the same bits back. How many linears changed. */
  fuseLora(options?: { loraScale?: number }): number {
    const what = `${this.constructor.name}.fuseLora`;
    const o = checkKnownOptions<{ loraScale?: number }>(`${what} options`, options, ['loraScale']);
    return fuseAdapters(what, this.#lora(), o.loraScale ?? 1, undefined);
  }

  /** Puts back the weights fuseLora changed, bit for bit. How many linears changed. */
  unfuseLora(): number {
    return unfuseAdapters(`${this.constructor.name}.unfuseLora`, this.#lora(), undefined);
  }

  /** Removes every adapter and releases its memory (diffusers' unload_lora); fused weights stay fused. */
  unloadLora(): void {
    unloadAdapters(this.#lora());
  }

  // the model as the one component its LoRA methods act on (the name is for messages only)
  #lora(): LoraComponents {
    return new Map([['model', this]]);
  }
}

// What to do about a missing config.json: name the pipeline's components when no subfolder was
// given, say which component's folder is missing when one was
function missingConfigHint(repo: RepoFiles, subfolder: string | undefined): string {
  if (!repo.has('model_index.json')) return '';
  if (subfolder !== undefined) {
    const folder = inSubfolder(subfolder, '');
    const present = repo.list().some((f) => f.startsWith(folder));
    return `: the pipeline's ${folder} folder is ${present ? 'incomplete' : 'missing'}; copy or download that component again`;
  }
  const components = [...new Set(repo.list().filter((f) => f.endsWith('/config.json')).map((f) => f.split('/')[0]))];
  return components.length ? `; it is a diffusers pipeline: pass { subfolder } naming one of its components (${components.join(', ')})` : '';
}

// The parameter elements a checkpoint holds, from its headers alone
function checkpointElements(weights: string): number {
  const checkpoint = SafetensorsCheckpoint.open(weights);
  try {
    let elements = 0;
    for (const t of checkpoint.tensors.values()) elements += t.shape.reduce((n, d) => n * d, 1);
    return elements;
  } finally {
    checkpoint.close();
  }
}

// Loads `weights` into `model`: every key of the model must be in the checkpoint (under its own
// name or an alias); keys the model does not have are reported, unless the class ignores them.
async function loadWeights<M extends PreTrainedModel>(model: M, cls: PretrainedModelClass<M>, weights: string): Promise<void> {
  const checkpoint = SafetensorsCheckpoint.open(weights);
  const available = new Set(checkpoint.tensors.keys());
  checkpoint.close();
  const keyMap: Record<string, string> = {};
  const missing: string[] = [];
  for (const [key] of [...model.namedParameters(), ...model.namedBuffers()]) {
    if (available.has(key)) continue;
    const alias = cls.keyAliases(key).find((k) => available.has(k));
    if (alias) keyMap[key] = alias;
    else missing.push(key);
  }
  // linears whose weights the file holds in FP8 take their FP8 form first (fp8_checkpoint.ts)
  const fp8 = prepareFp8Checkpoint(model, weights, (path, linear) => {
    const key = keyMap[`${path}.weight`] ?? `${path}.weight`;
    return available.has(key) ? [{ key, from: 0, rows: linear.outFeatures }] : undefined;
  });
  for (const key of fp8.ownKeys) keyMap[key] = `${key} (set by the FP8 loader)`; // not a file key: left to finish()
  const stillMissing = missing.filter((k) => !fp8.ownKeys.has(k));
  if (stillMissing.length) {
    const list = stillMissing.slice(0, 8).map((k) => `"${k}"`).join(', ') + (stillMissing.length > 8 ? `, ... (${stillMissing.length} in all)` : '');
    throw new DTorchError(ErrorCode.BadFile, `${weights}: lacks weights of ${cls.name}: ${list}; is it a ${cls.name} checkpoint (and the right subfolder)?`);
  }
  const result = await model.loadStateDict(weights, { strict: false, keyMap });
  fp8.finish();
  const ignored = fp8.count ? [...cls.ignoredCheckpointKeys, ...fp8AuxiliaryKeys] : cls.ignoredCheckpointKeys;
  const unexpected = result.unexpectedKeys.filter((k) => !ignored.some((re) => re.test(k)));
  if (unexpected.length) log.warn(`${cls.name}: ${weights} has ${unexpected.length} weights the model does not use (ignored): ${unexpected.slice(0, 5).join(', ')}`);
}
