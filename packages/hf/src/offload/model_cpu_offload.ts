// Model CPU offload, as diffusers' enable_model_cpu_offload: a pipeline's models (text encoders,
// transformer, VAE) live in host memory (HostCopy) and one at a time on its devices. A forward
// pre-hook on every module of a model, and on the VAE's encode and decode (which run without
// its forward), puts the model on its mesh when any of it runs, and the model on before it off
// (diffusers' chain of hooks); the pipeline puts the last one off when a call ends (diffusers'
// maybe_free_model_hooks). Everything is recorded in order, so a weight leaves only
// after the queued work that reads it, and the next model's copies queue behind the last one's work.
import { DTorchError, ErrorCode } from '@dtorch/common';
import * as nn from '@dtorch/nn';
import { hasPackedProjections } from '../models/attention/packed_projections.js';
import { HostCopy } from './host_copy.js';
import { offloadKindOf, setOffloadKind } from './offload_kind.js';

// One model and what moves it.
interface Offloaded {
  readonly model: nn.Module;
  readonly copy: HostCopy;
  readonly hooks: nn.RemovableHandle[];
}

/** A pipeline's models, each on its devices only while it runs (DiffusionPipeline.enableModelCpuOffload). */
export class ModelCpuOffload {
  readonly #models: Offloaded[];
  #current: Offloaded | undefined;

  private constructor(models: ReadonlyMap<string, nn.Module>) {
    this.#models = [...models.values()].map((model) => ({ model, copy: new HostCopy([model]), hooks: [] }));
  }

  /**
   * Reads `models` (by diffusers' component name) into host memory (`what` names the call in errors), drops them from their
   * devices, and hooks them so that each comes back when it runs. Resolves once they are off.
   */
  static async enable(what: string, models: ReadonlyMap<string, nn.Module>): Promise<ModelCpuOffload> {
    const taken = [...models].find(([, m]) => offloadKindOf(m));
    if (taken) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: the ${taken[0]} is under ${offloadKindOf(taken[1])} offloading already; remove it first (one kind at a time)`);
    const offload = new ModelCpuOffload(models);
    for (const m of offload.#models) setOffloadKind(m.model, 'model'); // from now: group offloading of one is refused
    try {
      await Promise.all(offload.#models.map((m) => m.copy.offloadAll()));
    } catch (err) {
      offload.disable(); // a model that went off comes back: a call that throws changes nothing
      throw err;
    }
    for (const m of offload.#models) {
      const onload = () => offload.#onload(m);
      for (const [, module] of m.model.namedModules()) m.hooks.push(module.registerForwardPreHook(onload));
      for (const method of ENTRY_METHODS) if (typeof (m.model as unknown as Record<string, unknown>)[method] === 'function') m.hooks.push(beforeMethod(m.model, method, onload));
    }
    return offload;
  }

  /**
   * Puts every model off its devices (the end of a call). A model no longer in `models` (the
   * pipeline's now: releaseTextEncoders dropped it) loses its hooks and its host copy.
   */
  offloadAll(models: ReadonlySet<nn.Module>): void {
    for (const m of this.#models.splice(0)) {
      if (models.has(m.model)) {
        m.copy.offload();
        this.#models.push(m);
      } else {
        for (const h of m.hooks.splice(0)) h.remove();
        m.copy.clear();
        setOffloadKind(m.model, undefined);
      }
    }
    this.#current = undefined;
  }

  /** Takes the hooks off and puts every model back on its devices for good; the host copies are dropped. */
  disable(): void {
    for (const m of this.#models) {
      for (const h of m.hooks.splice(0)) h.remove();
      onloadPacked(m.model, m.copy);
      m.copy.clear();
      setOffloadKind(m.model, undefined);
    }
    this.#current = undefined;
  }

  // the model `m` runs: the one on before it goes off, and it comes on
  #onload(m: Offloaded): void {
    if (this.#current === m) return;
    this.#current?.copy.offload();
    onloadPacked(m.model, m.copy);
    this.#current = m;
  }
}

// Methods through which a model runs without its forward: the VAE's encode and decode (whose
// patch-parallel path reads the layers' weights directly).
const ENTRY_METHODS = ['encode', 'decode'] as const;

// Runs `before` ahead of every call of `model[method]` (an own property over the class's method), until remove().
function beforeMethod(model: nn.Module, method: string, before: () => void): nn.RemovableHandle {
  const record = model as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = record[method]!;
  record[method] = function (this: unknown, ...args: unknown[]) {
    before();
    return original.apply(this, args);
  };
  return { remove: () => void delete record[method] };
}

/**
 * Makes `copy`'s tensors on their devices again, with the projections of `model` packed into one
 * buffer as loading left them (PreTrainedModel.packProjections): the same matmuls, so the same bits.
 */
export function onloadPacked(model: nn.Module, copy: HostCopy): void {
  if (copy.onload() === 0) return;
  if (hasPackedProjections(model)) {
    model.packProjections();
    copy.sameValues(); // packing moved the values onload made, it changed none
  }
}
