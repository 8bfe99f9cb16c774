// TaylorSeer (https://huggingface.co/papers/2503.06923) as diffusers' hooks/taylorseer_cache.py:
// every attention of the transformer's blocks (diffusers' default modules: names matching
// transformer_blocks.*attn, single_transformer_blocks.*attn) runs in full on some calls and is
// predicted on the others from a Taylor series of its outputs: after each full call, the outputs
// and their divided differences over the calls between (up to `maxOrder`) are kept as factors
// (in `taylorFactorsDtype`); a predicted call gives Σ_k factor_k · offsetᵏ / k!, offset the calls
// since the last full one. The first `disableCacheBeforeStep` calls of a context run in full,
// then one call in `cacheInterval`, and every call from `disableCacheAfterStep` on. The rest of
// each block (norms, feed-forward) runs every call.
//
// Each context counts its own calls: a pipeline runs true CFG's branches in 'cond' and 'uncond';
// a batch of both branches (BOTH_BRANCHES, Flux on a 'cfg' dim) keeps one state for the batch,
// which equals the branches' two (the factors are elementwise, and both count the same calls).
// The decisions depend on the call count alone: every device takes them alike, and a mesh needs
// nothing more (the factors lie as the outputs do).
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';
import type { CheckedTaylorSeerCacheConfig } from './cache_config.js';
import { StepCache } from './step_cache.js';

/** diffusers' default modules: the blocks' attentions (re.fullmatch). */
export const TAYLORSEER_ATTENTIONS = [/^blocks.*attn$/, /^transformer_blocks.*attn$/, /^single_transformer_blocks.*attn$/, /^temporal_transformer_blocks.*attn$/];

// one context's series of one module: its calls, the last full one, the factors per output
// (undefined where the output is), and whether the module answers with an array
interface Series {
  step: number;
  lastUpdate: number | undefined;
  factors: (dt.Tensor[] | undefined)[];
  dtypes: (dt.DType | undefined)[];
  array: boolean;
}

// one hooked module: its around hook, and its series per context
interface Hooked {
  module: nn.Module;
  handle: nn.RemovableHandle;
  series: Map<string, Series>;
}

/** A transformer's TaylorSeer cache (see the file's comment). */
export class TaylorSeerCache extends StepCache {
  readonly config: CheckedTaylorSeerCacheConfig;
  readonly #hooked: Hooked[];

  /** Hooks `modules` (the attentions) of a model. */
  constructor(config: CheckedTaylorSeerCacheConfig, modules: readonly nn.Module[]) {
    super();
    this.config = config;
    this.#hooked = modules.map((module) => this.#hook(module));
  }

  /** The modules whose outputs it predicts. */
  get modules(): nn.Module[] {
    return this.#hooked.map((h) => h.module);
  }

  protected forget(): void {
    for (const h of this.#hooked) {
      for (const s of h.series.values()) dropFactors(s);
      h.series.clear();
    }
  }

  /** Takes the hooks off: each module's forward as it was. */
  override detach(): void {
    super.detach();
    for (const h of this.#hooked) h.handle.remove();
    this.#hooked.length = 0;
  }

  // an around hook on `module` (nn's forward hooks)
  #hook(module: nn.Module): Hooked {
    const series = new Map<string, Series>();
    const hooked: Hooked = { module, series, handle: module.registerForwardAroundHook((_m, forward, args) => this.#forward(hooked, forward, args)) };
    return hooked;
  }

  // one call of a hooked module: in full (the factors updated) or predicted
  #forward(h: Hooked, forward: (...args: unknown[]) => unknown, args: unknown[]): unknown {
    let s = h.series.get(this.context);
    if (!s) h.series.set(this.context, (s = { step: -1, lastUpdate: undefined, factors: [], dtypes: [], array: false }));
    s.step += 1;
    const computed = this.#computes(s.step);
    // every module decides alike: the first one's call is the transformer call's decision
    if (h === this.#hooked[0]) this.decided(this.branches.map(() => undefined), this.branches.map(() => computed));
    if (!computed && s.lastUpdate !== undefined) return this.#predict(s);
    const out = forward(...args);
    this.#update(s, out);
    return out;
  }

  // diffusers' rule: the warm-up calls, one in cacheInterval after them, and the cool-down
  #computes(step: number): boolean {
    const { cacheInterval, disableCacheBeforeStep, disableCacheAfterStep } = this.config;
    const interval = (((step - disableCacheBeforeStep - 1) % cacheInterval) + cacheInterval) % cacheInterval;
    return step < disableCacheBeforeStep || interval === 0 || (disableCacheAfterStep !== undefined && step >= disableCacheAfterStep);
  }

  // the outputs and their divided differences since the last full call, as the new factors
  #update(s: Series, out: unknown): void {
    const outputs = asOutputs(out);
    const delta = s.lastUpdate === undefined ? undefined : s.step - s.lastUpdate;
    const factors = outputs.map((features, i) => {
      if (!features) return undefined;
      const made = [features];
      const previous = s.factors[i];
      for (let j = 0; delta !== undefined && previous && j < this.config.maxOrder && previous[j]; j++) {
        made.push(made[j]!.sub(previous[j]!.to(features.dtype)).div(delta));
      }
      // the output itself is the caller's (it may free it): a factor of the same dtype is a copy
      return made.map((f) => {
        const stored = f.to(this.config.taylorFactorsDtype);
        return dt.keep(stored === features ? features.clone() : stored);
      });
    });
    dropFactors(s);
    s.factors = factors;
    s.dtypes = outputs.map((o) => o?.dtype);
    s.array = Array.isArray(out);
    s.lastUpdate = s.step;
  }

  // Σ_k factor_k · offsetᵏ / k!, in each output's dtype; the outputs' structure as the module gives them
  #predict(s: Series): unknown {
    const offset = s.step - s.lastUpdate!;
    const outputs = s.factors.map((factors, i) => {
      if (!factors) return undefined;
      const dtype = s.dtypes[i]!;
      let out = factors[0]!.to(dtype);
      if (out === factors[0]) out = out.clone(); // the caller's to free, the factor the cache's
      let coefficient = 1;
      for (let k = 1; k < factors.length; k++) {
        coefficient = (coefficient * offset) / k;
        out = out.add(factors[k]!.to(dtype).mul(coefficient));
      }
      return out;
    });
    return s.array ? outputs : outputs[0];
  }
}

// a module's output as a list (one tensor, or an array of tensors and undefined)
function asOutputs(out: unknown): (dt.Tensor | undefined)[] {
  if (out instanceof dt.Tensor) return [out];
  if (Array.isArray(out)) return out.map((o) => (o instanceof dt.Tensor ? o : undefined));
  return [];
}

function dropFactors(s: Series): void {
  for (const factors of s.factors) if (factors) dt.dispose(factors);
  s.factors = [];
}
