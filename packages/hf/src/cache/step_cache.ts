// What every step cache keeps and reports (first_block_cache.ts, mag_cache.ts, taylorseer_cache.ts): the
// context the transformer's calls run in (diffusers' cache_context: a pipeline names true CFG's
// branches 'cond' and 'uncond'), and each call's decision, reset at each generate.
import * as dt from '@dtorch/api';
import type { CacheConfig, CheckedCacheConfig } from './cache_config.js';

/** One transformer call's decision. */
export interface CacheDecision {
  /** The cache context the call ran in ('cond', 'uncond'). */
  readonly context: string;
  /**
   * First-Block Cache: absmean(r − r_prev) / absmean(r_prev), undefined on a context's first call;
   * MagCache calibrating: the step's ratio; else undefined.
   */
  readonly statistic: number | undefined;
  /** Whether the cached work ran (First-Block Cache: the remaining blocks; MagCache: every block; TaylorSeer: the attentions). */
  readonly computed: boolean;
}

/**
 * The context of a batched call whose halves are true CFG's two branches, [negative; positive]
 * (Flux's on a 'cfg' mesh dim): each half decides and caches as the branch's own call would, in
 * contexts 'uncond' and 'cond'.
 */
export const BOTH_BRANCHES = 'uncond+cond';

/** A transformer's step cache: its config, the context of its calls, and their decisions. */
export abstract class StepCache {
  /** The config it runs (checked, defaults filled in). */
  abstract readonly config: CheckedCacheConfig;
  #decisions: CacheDecision[] = [];
  #context = 'cond';

  /** The kind ('first-block', 'mag', 'taylorseer'). */
  get kind(): CacheConfig['kind'] {
    return this.config.kind;
  }

  /** The decisions since the last reset(), in call order. */
  get decisions(): readonly CacheDecision[] {
    return this.#decisions;
  }

  /** Runs `fn` with the transformer's calls in context `name` (diffusers' cache_context; BOTH_BRANCHES for a batch of both branches). */
  withContext<T>(name: string, fn: () => T): T {
    const outer = this.#context;
    this.#context = name;
    try {
      return fn();
    } finally {
      this.#context = outer;
    }
  }

  /** Forgets what the cache holds and its decisions (each generate starts afresh). */
  reset(): void {
    this.#decisions = [];
    this.forget();
  }

  /** Stops caching: what it holds freed, what it changed in the model put back. */
  detach(): void {
    this.reset();
  }

  /** The context of the call running now. */
  protected get context(): string {
    return this.#context;
  }

  /** The contexts of the call's rows: one, or the two branches of a BOTH_BRANCHES batch ([negative; positive]). */
  protected get branches(): string[] {
    return this.#context === BOTH_BRANCHES ? ['uncond', 'cond'] : [this.#context];
  }

  /** Records the call's decisions, one per branch, in the order diffusers' calls take them (the prompt's first). */
  protected decided(statistics: readonly (number | undefined)[], computed: readonly boolean[]): void {
    const branches = this.branches;
    for (const i of branches.length === 2 ? [1, 0] : [0]) this.#decisions.push({ context: branches[i]!, statistic: statistics[i], computed: computed[i]! });
  }

  /** Frees what the cache holds. */
  protected abstract forget(): void;
}

/** What a model's blocks give a block cache (First-Block Cache, MagCache). */
export interface FirstBlockRun {
  /** The first block's image output. */
  readonly hidden: dt.Tensor;
  /** Runs the remaining blocks on from the first block's outputs: the last block's image output. */
  rest(): dt.Tensor;
}

/** A cache the model's forward runs its blocks through: the image tokens after the last block, for the first block's input. */
export interface BlockCache {
  /** The image tokens after the last block for the first block's input `input`; `first()` runs the first block, its `rest()` the others, as the cache decides. */
  run(input: dt.Tensor, first: () => FirstBlockRun): dt.Tensor;
}

/** Whether a cached tensor still fits a call's (the same shape, dtype, mesh and placements). */
export const sameLayout = (a: dt.Tensor, b: dt.Tensor): boolean =>
  a.mesh.equals(b.mesh) && a.dtype === b.dtype && a.shape.length === b.shape.length && a.shape.every((s, i) => s === b.shape[i]) && a.placements.every((p, i) => p.code() === b.placements[i]!.code());

/** `t` whole on every device: a mean over a split dim is a partial sum of the devices' parts. */
export const replicated = (t: dt.Tensor): dt.Tensor => (t.placements.every((p) => p.isReplicate()) ? t : t.redistribute(t.placements.map(() => dt.Replicate())));
