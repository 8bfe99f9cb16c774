// LoRA adapters on a model's linears by module path, as PEFT's inject_adapter_in_model and the
// set_adapters / disable / delete / fuse / unfuse / unload calls of diffusers' PeftAdapterMixin:
// adapters are named, several may be loaded at once, and the active ones run with a weight each.
// Every change is checked whole before anything changes: a call that throws leaves the model
// as it was.
import type * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { Linear } from '../layers/linear.js';
import type { Module } from '../module.js';
import { LinearLora, checkLoraFits, linearLora } from './linear_lora.js';

/** One linear's adapter: A [rank, in], B [out, rank], and alpha (it runs with scale alpha / rank). */
export interface LoraWeights {
  /** lora_A [rank, in]. */
  readonly a: dt.Tensor;
  /** lora_B [out, rank]. */
  readonly b: dt.Tensor;
  /** PEFT's lora_alpha: the adapter runs with scale alpha / rank. */
  readonly alpha: number;
}

/** Every linear of `model` with adapters (or a fused weight), with its path. */
function* adapted(model: Module): Generator<[string, LinearLora]> {
  for (const [path, m] of model.namedModules()) {
    const lora = m instanceof Linear ? linearLora(m) : undefined;
    if (lora) yield [path, lora];
  }
}

/** The linear at `path` of `model`, or an error naming what is there instead. */
function linearAt(model: Module, path: string, where: string): Linear {
  let m: Module | undefined;
  try {
    m = model.getSubmodule(path);
  } catch {
    m = undefined;
  }
  if (m instanceof Linear) return m;
  throw new DTorchError(
    ErrorCode.BadFile,
    `${where}: the LoRA targets "${path}", which ${m ? `is a ${m.constructor.name}, not a Linear` : `${model.constructor.name} does not have`}; is the adapter for this model? (pass { strict: false } to skip targets the model lacks)`,
  );
}

/**
 * Adds adapter `name` to the linears of `model` at the paths of `modules` (which it takes over),
 * active with weight 1 beside the adapters active already. Every target is checked first (it must
 * be a Linear of matching sizes, without an adapter of that name); `where` names the source in
 * errors. Paths the model lacks are an error unless `skipMissing`, which skips them and returns them.
 */
export function addLoraAdapter(model: Module, name: string, modules: ReadonlyMap<string, LoraWeights>, where: string, skipMissing = false): string[] {
  if (typeof name !== 'string' || name === '') throw new DTorchError(ErrorCode.InvalidArgument, `${where}: an adapter name must be a non-empty string, got ${String(name)}`);
  const targets: [Linear, LoraWeights][] = [];
  const skipped: string[] = [];
  for (const [path, weights] of modules) {
    let linear: Linear;
    try {
      linear = linearAt(model, path, where);
    } catch (err) {
      if (skipMissing) {
        skipped.push(path);
        continue;
      }
      throw err;
    }
    checkLoraFits(linear, `${where}: "${path}"`, weights.a, weights.b);
    if (!Number.isFinite(weights.alpha) || weights.alpha <= 0) throw new DTorchError(ErrorCode.BadFile, `${where}: "${path}" has LoRA alpha ${weights.alpha}; alpha must be a positive number`);
    targets.push([linear, weights]);
  }
  if (modelHasAdapter(model, name)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: ${model.constructor.name} already has a LoRA adapter named "${name}"; give another adapterName, or delete it first`);
  const weights = activeLoraWeights(model);
  weights.set(name, 1);
  for (const [linear, w] of targets) LinearLora.of(linear).add(name, w.a, w.b, w.alpha);
  for (const [, lora] of adapted(model)) lora.setActive(weights);
  return skipped;
}

function modelHasAdapter(model: Module, name: string): boolean {
  for (const [, lora] of adapted(model)) if (lora.names.includes(name)) return true;
  return false;
}

/** The names of the adapters loaded into `model`, in the order they were added. */
export function loraAdapterNames(model: Module): string[] {
  const names = new Set<string>();
  for (const [, lora] of adapted(model)) for (const n of lora.names) names.add(n);
  return [...names];
}

/** The active adapters of `model` and their weights. */
export function activeLoraWeights(model: Module): Map<string, number> {
  // each linear knows the active adapters it has; adapters may cover different linears
  const active = new Map<string, number>();
  for (const [, lora] of adapted(model)) for (const [name, weight] of lora.active) active.set(name, weight);
  return active;
}

/**
 * Makes `weights` (adapter name -> weight) the active adapters of `model`, as diffusers'
 * set_adapters; the others stay loaded. A name the model does not have is an error.
 */
export function setLoraAdapters(model: Module, weights: ReadonlyMap<string, number>, where = 'setAdapters'): void {
  const known = loraAdapterNames(model);
  for (const [name, w] of weights) {
    if (!known.includes(name)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: no LoRA adapter named "${name}" is loaded (loaded: ${known.map((n) => `"${n}"`).join(', ') || 'none'})`);
    if (typeof w !== 'number' || !Number.isFinite(w)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: the weight of "${name}" must be a finite number, got ${String(w)}`);
  }
  checkNotFused(model, where);
  for (const [, lora] of adapted(model)) lora.setActive(weights);
}

/** Turns every adapter of `model` off (false) or on again, keeping them and their weights. */
export function enableLora(model: Module, on: boolean): void {
  for (const [, lora] of adapted(model)) lora.setEnabled(on);
}

/** Whether `model`'s adapters run (enableLora). */
export function loraEnabled(model: Module): boolean {
  for (const [, lora] of adapted(model)) return lora.enabled;
  return true;
}

/** Removes adapter `name` from `model`, releasing its memory; an unknown name is an error. */
export function deleteLoraAdapter(model: Module, name: string, where = 'deleteAdapters'): void {
  if (!loraAdapterNames(model).includes(name)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: no LoRA adapter named "${name}" is loaded`);
  checkNotFused(model, where);
  for (const [, lora] of adapted(model)) lora.remove(name);
}

/**
 * Fuses the active adapters into the weights (diffusers' fuse_lora): W += scale · Σ weight ·
 * alpha / rank · B A, computed in float32. The weights as they were are kept (no copy) for
 * unfuseLora, which puts the same bits back. Returns how many linears changed.
 */
export function fuseLora(model: Module, scale = 1, where = 'fuseLora'): number {
  if (!Number.isFinite(scale)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: loraScale must be a finite number, got ${String(scale)}`);
  checkNotFused(model, where);
  let changed = 0;
  for (const [, lora] of adapted(model)) {
    lora.fuse(scale);
    if (lora.fusedNames.length) changed++;
  }
  return changed;
}

/** Puts back the weights fuseLora started from (the same bits). Returns how many linears changed. */
export function unfuseLora(model: Module): number {
  let changed = 0;
  for (const [, lora] of [...adapted(model)]) if (lora.unfuse()) changed++;
  return changed;
}

/** Whether any adapter of `model` is fused into its weights. */
export function loraFused(model: Module): boolean {
  for (const [, lora] of adapted(model)) if (lora.fusedNames.length) return true;
  return false;
}

/**
 * Removes every adapter of `model` and releases their memory (diffusers' unload_lora_weights);
 * weights fused into already stay fused, and what unfuse would have put back is released.
 */
export function unloadLora(model: Module): void {
  for (const [, lora] of [...adapted(model)]) lora.clear();
}

/** Releases every adapter of `model` and what they hold, for a model being disposed (no weight is laid back). */
export function disposeLora(model: Module): void {
  for (const [, lora] of [...adapted(model)]) lora.dispose();
}

function checkNotFused(model: Module, where: string): void {
  if (loraFused(model)) throw new DTorchError(ErrorCode.InvalidArgument, `${where}: LoRA adapters are fused into the weights; call unfuseLora() first`);
}
