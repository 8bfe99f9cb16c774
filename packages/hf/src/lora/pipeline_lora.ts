// LoRA adapters on a pipeline's components, as diffusers' LoraLoaderMixin: load_lora_weights
// reads a file (any layout lora_formats.ts knows), splits it by component (transformer,
// text_encoder, text_encoder_2, ...) and adds a named adapter to each; set_adapters,
// disable_lora / enable_lora, delete_adapters, fuse_lora / unfuse_lora and unload_lora_weights
// act on every component that has adapters. Everything is checked against the models before a
// tensor is made, so a load that fails leaves the pipeline as it was. After each change the
// models' packed projections are packed again (a change gives the adapted weights new handles).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, log } from '@dtorch/common';
import type { RepoOptions } from '@dtorch/external';
import { hasPackedProjections } from '../models/attention/packed_projections.js';
import { componentConfigs, moduleAlpha } from './lora_alpha.js';
import type { DiffusersLora, ModuleLora } from './lora_formats.js';
import type { LoraFile, LoraTensor } from './lora_state_dict.js';

/** A pipeline's components that take LoRAs, by diffusers' name; null where the pipeline has none now (released, left out). */
export type LoraComponents = ReadonlyMap<string, nn.Module | null>;

/** loadLoraWeights' options (diffusers' load_lora_weights arguments, camelCase), and where a hub repository's files come from. */
export interface LoadLoraWeightsOptions extends RepoOptions {
  /** The file inside a folder or hub repository (default: its one .safetensors file, or pytorch_lora_weights.safetensors). */
  weightName?: string;
  /** The adapter's name (default "default_<n>", n the adapters loaded before it). */
  adapterName?: string;
  /**
   * Whether keys the pipeline cannot place are an error (default true): keys of no known layout,
   * modules the models lack, a component the pipeline does not have. false loads the rest and
   * warns of what it left out.
   */
  strict?: boolean;
}

/** One module's adapter, checked, before its tensors are made. */
interface Planned {
  readonly path: string;
  readonly linear: nn.Linear;
  readonly lora: ModuleLora;
  readonly alpha: number;
}

const FLOATING: readonly string[] = ['F32', 'F16', 'BF16', 'F64'];

/**
 * Adds `converted` (the file `file` in diffusers' module paths) to `components` as adapter
 * `name`, active with weight 1 beside the adapters active already. Returns the adapter's name.
 */
export function addPipelineLora(what: string, components: LoraComponents, file: LoraFile, converted: DiffusersLora, adapterName: string | undefined, strict: boolean): string {
  const where = `${what}: ${file.path}`;
  const leftOut: string[] = [];
  const refuse = (message: string, keys: readonly string[]) => {
    if (strict) throw new DTorchError(ErrorCode.BadFile, `${where}: ${message}: ${preview(keys)}; is the LoRA for this pipeline? (pass { strict: false } to load the rest)`);
    leftOut.push(...keys);
  };
  if (converted.unknown.length) refuse(`${converted.unknown.length} key(s) of no LoRA layout DTorch reads (${converted.layout})`, converted.unknown);

  const configs = componentConfigs(file.path, file.metadata);
  const plans = new Map<string, Planned[]>();
  const byComponent = new Map<string, [string, ModuleLora][]>();
  for (const [key, lora] of converted.modules) {
    const dot = key.indexOf('.');
    const component = key.slice(0, dot);
    byComponent.set(component, [...(byComponent.get(component) ?? []), [key.slice(dot + 1), lora]]);
  }
  for (const [component, modules] of byComponent) {
    const model = components.get(component);
    const keys = modules.map(([path]) => `${component}.${path}`);
    if (model === undefined) {
      refuse(`${keys.length} module(s) of a ${component}, which this pipeline does not have (it has ${[...components.keys()].join(', ')})`, keys);
      continue;
    }
    if (model === null) {
      refuse(`${keys.length} module(s) of the ${component}, which the pipeline has released or was made without`, keys);
      continue;
    }
    const planned: Planned[] = [];
    for (const [path, lora] of modules) {
      const found = linearAt(model, path);
      if (!found) {
        refuse(`${component} (${model.constructor.name}) has no linear layer "${path}"`, [`${component}.${path}`]);
        continue;
      }
      for (const t of [lora.a, lora.b]) {
        if (!FLOATING.includes(t.dtype)) throw new DTorchError(ErrorCode.BadFile, `${where}: ${component}.${path}'s LoRA is ${t.dtype}; LoRA weights are floating point (F32, F16, BF16)`);
      }
      nn.checkLoraFits(found.linear, `${where}: ${component}.${path}`, lora.a, lora.b);
      const alpha = moduleAlpha(file.path, path, lora, configs.get(component));
      if (!Number.isFinite(alpha) || alpha <= 0) throw new DTorchError(ErrorCode.BadFile, `${where}: ${component}.${path} has LoRA alpha ${alpha}; alpha must be a positive number`);
      planned.push({ path: found.path, linear: found.linear, lora, alpha });
    }
    if (planned.length) plans.set(component, planned);
  }
  if (plans.size === 0) throw new DTorchError(ErrorCode.BadFile, `${where}: none of its ${converted.modules.size} LoRA module(s) is a linear layer of this pipeline's ${[...components.keys()].join(', ')}; is the LoRA for this model?`);

  const loaded = loadedNames(components);
  const name = adapterName ?? freshName(loaded);
  if (typeof name !== 'string' || name === '') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: adapterName must be a non-empty string, got ${JSON.stringify(name)}`);
  if (loaded.includes(name)) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: an adapter named "${name}" is loaded already; give another adapterName, or deleteAdapters("${name}") first`);

  // every check passed: the tensors, then the adapters (undone if a device fails on the way)
  const done: Planned[] = [];
  try {
    for (const [component, planned] of plans) {
      const model = components.get(component)!;
      const modules = new Map<string, nn.LoraWeights>();
      try {
        for (const p of planned) modules.set(p.path, { a: deviceTensor(p.lora.a, p.linear), b: deviceTensor(p.lora.b, p.linear), alpha: p.alpha });
        nn.addLoraAdapter(model, name, modules, where);
      } catch (err) {
        for (const m of modules.values()) dt.dispose([m.a, m.b]);
        throw err;
      }
      done.push(...planned);
    }
  } catch (err) {
    // linear by linear: a model with fused adapters refuses deleteLoraAdapter, not this new one
    for (const p of done) nn.linearLora(p.linear)?.remove(name);
    throw err;
  } finally {
    repack(components);
  }
  if (leftOut.length) log.warn(`${where}: left out ${leftOut.length} key(s) the pipeline cannot place (strict: false): ${preview(leftOut)}`);
  return name;
}

/** The adapter names loaded into each component that has any (diffusers' get_list_adapters). */
export function listAdapters(components: LoraComponents): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [component, model] of components) {
    const names = model ? nn.loraAdapterNames(model) : [];
    if (names.length) out[component] = names;
  }
  return out;
}

/** The active adapters (diffusers' get_active_adapters), in the order they were loaded. */
export function activeAdapters(components: LoraComponents): string[] {
  const active = new Set<string>();
  for (const model of components.values()) if (model && nn.loraEnabled(model)) for (const name of nn.activeLoraWeights(model).keys()) active.add(name);
  return loadedNames(components).filter((n) => active.has(n));
}

/** The active adapters and their weights (what setAdapters set), in the order they were loaded; none while disabled. */
export function activeAdapterWeights(components: LoraComponents): Map<string, number> {
  const weights = new Map<string, number>();
  for (const model of components.values()) if (model && nn.loraEnabled(model)) for (const [name, w] of nn.activeLoraWeights(model)) weights.set(name, w);
  return new Map(loadedNames(components).filter((n) => weights.has(n)).map((n) => [n, weights.get(n)!] as const));
}

/** Whether any component has adapters fused into its weights (fuseAdapters). */
export function adaptersFused(components: LoraComponents): boolean {
  return [...components.values()].some((m) => m !== null && nn.loraFused(m));
}

/**
 * Makes `names` the active adapters, with `weights` (one for all, or one each; default 1), as
 * diffusers' set_adapters: each component runs those of them it has.
 */
export function setAdapters(what: string, components: LoraComponents, names: string | readonly string[], weights?: number | readonly number[]): void {
  const list = typeof names === 'string' ? [names] : names;
  if (!Array.isArray(list) || !list.every((n) => typeof n === 'string')) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: adapter names must be a string or an array of strings, got ${JSON.stringify(names)}`);
  const ws = weights === undefined ? list.map(() => 1) : typeof weights === 'number' ? list.map(() => weights) : weights;
  if (!Array.isArray(ws) || ws.length !== list.length || !ws.every((w) => typeof w === 'number' && Number.isFinite(w))) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give one finite weight for every adapter, or one for all (${list.length} adapter(s), weights ${JSON.stringify(weights)})`);
  }
  checkKnown(what, components, list);
  checkNotFused(what, components);
  for (const model of adaptedModels(components)) {
    const own = nn.loraAdapterNames(model);
    nn.setLoraAdapters(model, new Map(list.map((n, i) => [n, ws[i]!] as const).filter(([n]) => own.includes(n))), what);
  }
  repack(components);
}

/** Turns every component's adapters off or on (diffusers' disable_lora / enable_lora), keeping them. */
export function enableAdapters(components: LoraComponents, on: boolean): void {
  for (const model of adaptedModels(components)) nn.enableLora(model, on);
  repack(components);
}

/** Deletes adapters `names` from every component, releasing their memory (diffusers' delete_adapters). */
export function deleteAdapters(what: string, components: LoraComponents, names: string | readonly string[]): void {
  const list = typeof names === 'string' ? [names] : names;
  if (!Array.isArray(list) || !list.every((n) => typeof n === 'string')) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: adapter names must be a string or an array of strings, got ${JSON.stringify(names)}`);
  checkKnown(what, components, list);
  checkNotFused(what, components);
  for (const model of adaptedModels(components)) {
    const own = nn.loraAdapterNames(model);
    for (const n of list) if (own.includes(n)) nn.deleteLoraAdapter(model, n, what);
  }
  repack(components);
}

/**
 * Fuses the active adapters into the weights of `only` (default every component), times
 * `loraScale` (diffusers' fuse_lora); returns how many linears changed.
 */
export function fuseAdapters(what: string, components: LoraComponents, loraScale: number, only: readonly string[] | undefined): number {
  if (typeof loraScale !== 'number' || !Number.isFinite(loraScale)) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: loraScale must be a finite number, got ${String(loraScale)}`);
  const chosen = pick(what, components, only);
  checkNotFused(what, new Map(chosen));
  let changed = 0;
  for (const [, model] of chosen) changed += nn.fuseLora(model, loraScale, what);
  repack(components);
  return changed;
}

/** Puts back the weights fuseAdapters changed (the same bits) in `only` (default every component); how many linears changed. */
export function unfuseAdapters(what: string, components: LoraComponents, only: readonly string[] | undefined): number {
  let changed = 0;
  for (const [, model] of pick(what, components, only)) changed += nn.unfuseLora(model);
  repack(components);
  return changed;
}

/** Removes every adapter of every component and releases them (diffusers' unload_lora_weights); fused weights stay fused. */
export function unloadAdapters(components: LoraComponents): void {
  for (const model of adaptedModels(components)) nn.unloadLora(model);
  repack(components);
}

/**
 * Runs `call` with every unfused adapter's weight times `scale` (diffusers' joint_attention_kwargs
 * "scale", which also scales the text encoders' adapters as lora_scale), the weights put back
 * after. Components with fused adapters keep what was fused.
 */
export async function withLoraScale<T>(what: string, components: LoraComponents, scale: number | undefined, call: () => Promise<T>): Promise<T> {
  const models = scale === undefined || scale === 1 ? [] : adaptedModels(components);
  const saved = models.map((m) => [m, nn.activeLoraWeights(m)] as const).filter(([m, w]) => w.size && !nn.loraFused(m));
  if (saved.length < models.filter((m) => nn.activeLoraWeights(m).size).length) log.warn(`${what}: loraScale does not reach adapters fused into the weights (fuseLora); unfuseLora() to scale them per call`);
  if (saved.length === 0) return call();
  for (const [model, weights] of saved) nn.setLoraAdapters(model, new Map([...weights].map(([n, w]) => [n, w * scale!])), what);
  repack(components);
  try {
    return await call();
  } finally {
    for (const [model, weights] of saved) nn.setLoraAdapters(model, weights, what);
    repack(components);
  }
}

// the linear at `path` of `model`, as the file names it or below CLIP's "text_model." (transformers
// 5's CLIPTextModel names its LoRA keys without it; DTorch's modules keep the checkpoint's paths)
function linearAt(model: nn.Module, path: string): { linear: nn.Linear; path: string } | undefined {
  for (const candidate of [path, `text_model.${path}`]) {
    let m: nn.Module | undefined;
    try {
      m = model.getSubmodule(candidate);
    } catch {
      continue;
    }
    if (m instanceof nn.Linear) return { linear: m, path: candidate };
  }
  return undefined;
}

// A [rank, in] or B [out, rank] from the file, on the linear's mesh (the adapter places it as the weight lies)
function deviceTensor(t: LoraTensor, linear: nn.Linear): dt.Tensor {
  return dt.fromBuffer(t.bytes, nn.fromSafetensorsDtype[t.dtype], t.shape, { mesh: linear.weight.mesh });
}

function adaptedModels(components: LoraComponents): nn.Module[] {
  return [...components.values()].filter((m): m is nn.Module => m !== null && nn.loraAdapterNames(m).length > 0);
}

// every adapter name loaded into any component, in the order first seen
function loadedNames(components: LoraComponents): string[] {
  return [...new Set([...components.values()].flatMap((m) => (m ? nn.loraAdapterNames(m) : [])))];
}

function freshName(loaded: readonly string[]): string {
  let n = loaded.length;
  while (loaded.includes(`default_${n}`)) n++;
  return `default_${n}`;
}

function checkKnown(what: string, components: LoraComponents, names: readonly string[]): void {
  const loaded = loadedNames(components);
  const missing = names.filter((n) => !loaded.includes(n));
  if (missing.length) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: no LoRA adapter named ${missing.map((n) => `"${n}"`).join(', ')} is loaded (loaded: ${loaded.map((n) => `"${n}"`).join(', ') || 'none'})`);
}

function checkNotFused(what: string, components: LoraComponents): void {
  if ([...components.values()].some((m) => m && nn.loraFused(m))) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: LoRA adapters are fused into the weights; call unfuseLora() first`);
}

// the components named in `only` (all when undefined), those the pipeline has now
function pick(what: string, components: LoraComponents, only: readonly string[] | undefined): [string, nn.Module][] {
  if (only !== undefined) {
    const unknown = Array.isArray(only) ? only.filter((c) => !components.has(c)) : [String(only)];
    if (unknown.length) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: components ${JSON.stringify(unknown)} are not this pipeline's; it has ${[...components.keys()].join(', ')}`);
  }
  return [...components].filter((e): e is [string, nn.Module] => e[1] !== null && (only === undefined || only.includes(e[0])));
}

// each model's q/k/v (and adaLN) groups packed again: a LoRA change gave the weights new handles
function repack(components: LoraComponents): void {
  for (const model of components.values()) if (model && hasPackedProjections(model)) model.packProjections();
}

const preview = (keys: readonly string[]): string => `${keys.slice(0, 5).join(', ')}${keys.length > 5 ? `, and ${keys.length - 5} more` : ''}`;
