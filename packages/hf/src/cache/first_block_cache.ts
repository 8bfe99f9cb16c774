// First-Block Cache (ParaAttention's, as diffusers' hooks/first_block_cache.py): each transformer
// call runs its first block, and runs the remaining blocks only when the first block's residual
// (its output minus its input, image tokens) changed since the last call that ran them by more
// than the threshold, relative to that residual's mean magnitude: absmean(r − r_prev) /
// absmean(r_prev) > threshold. Otherwise the call reuses what the remaining blocks added then
// (the tail residual: the last block's image output minus the first block's), added to this
// call's first-block output. The first call of a context always runs them.
//
// Each context keeps its own cache: a pipeline runs true CFG's two branches as two calls in
// contexts 'cond' and 'uncond', as diffusers' Flux pipeline; a batched call of both branches
// (SD3's) keeps one cache for the batch. The statistic is one mean over every element, so on a
// mesh (tokens over 'ulysses', the batch over 'cfg' / 'dp') it is reduced over all of them
// before the host reads it: every device takes the decision one device would (the one program
// takes it once for all). It is computed with diffusers' ops in the hidden states' dtype.
//
// The host reads the statistic between the first block and the rest: the step's recorded work is
// cut there, and the engine recognises (and on a GPU replays as CUDA graphs) the first block's
// part, the remaining blocks' part and the cached part each as their own segments.
import * as dt from '@dtorch/api';

/** One transformer call's decision. */
export interface CacheDecision {
  /** The cache context the call ran in ('cond', 'uncond'). */
  readonly context: string;
  /** absmean(r − r_prev) / absmean(r_prev); undefined on a context's first call. */
  readonly statistic: number | undefined;
  /** Whether the remaining blocks ran (else their last residual was reused). */
  readonly computed: boolean;
}

/** What the model's blocks give the cache (see FirstBlockCache.run). */
export interface FirstBlockRun {
  /** The first block's image output. */
  readonly hidden: dt.Tensor;
  /** Runs the remaining blocks on from the first block's outputs: the last block's image output. */
  rest(): dt.Tensor;
}

// a context's cache: the first block's residual and the tail residual of the last call that ran every block
interface ContextState {
  head: dt.Tensor;
  tail: dt.Tensor;
}

/** A transformer's First-Block Cache: its contexts' residuals and the decisions taken so far. */
export class FirstBlockCache {
  readonly kind = 'first-block';
  /** The residual change above which the remaining blocks run. */
  readonly threshold: number;
  readonly #states = new Map<string, ContextState>();
  #decisions: CacheDecision[] = [];
  #context = 'cond';

  constructor(threshold: number) {
    this.threshold = threshold;
  }

  /** The decisions since the last reset(), in call order. */
  get decisions(): readonly CacheDecision[] {
    return this.#decisions;
  }

  /** Runs `fn` with the transformer's calls in context `name` (diffusers' cache_context). */
  withContext<T>(name: string, fn: () => T): T {
    const outer = this.#context;
    this.#context = name;
    try {
      return fn();
    } finally {
      this.#context = outer;
    }
  }

  /**
   * The image hidden states after the model's last block, for the first block's input `input`
   * (image tokens): `first()` runs the first block; its `rest()` the others when the cache says so.
   */
  run(input: dt.Tensor, first: () => FirstBlockRun): dt.Tensor {
    const { hidden, rest } = first();
    const residual = hidden.sub(input);
    let state = this.#states.get(this.#context);
    if (state && !sameLayout(state.head, residual)) {
      // another size or batch in this context: start over
      this.#drop(this.#context);
      state = undefined;
    }
    const statistic = state && this.#statistic(residual, state.head);
    const computed = statistic === undefined || statistic > this.threshold;
    this.#decisions.push({ context: this.#context, statistic, computed });
    if (!computed) {
      residual.dispose();
      return hidden.add(state!.tail);
    }
    const out = rest();
    const tail = dt.keep(out.sub(hidden));
    this.#drop(this.#context);
    this.#states.set(this.#context, { head: dt.keep(residual), tail });
    return out;
  }

  /** Forgets every context's residuals and the decisions (each generate starts afresh). */
  reset(): void {
    for (const name of [...this.#states.keys()]) this.#drop(name);
    this.#decisions = [];
  }

  // absmean(r − r_prev) / absmean(r_prev), read on the host (see the file's comment)
  #statistic(residual: dt.Tensor, previous: dt.Tensor): number {
    const ratio = dt.tidy(() => whole(residual.sub(previous).abs().mean()).div(whole(previous.abs().mean())));
    try {
      return Number(ratio.itemSync());
    } finally {
      ratio.dispose();
    }
  }

  #drop(name: string): void {
    const state = this.#states.get(name);
    if (!state) return;
    dt.dispose([state.head, state.tail]);
    this.#states.delete(name);
  }
}

// a mean over a split dim is a partial sum of the devices' parts: summed on every device
const whole = (t: dt.Tensor): dt.Tensor => (t.placements.every((p) => p.isReplicate()) ? t : t.redistribute(t.placements.map(() => dt.Replicate())));

const sameLayout = (a: dt.Tensor, b: dt.Tensor): boolean =>
  a.mesh.equals(b.mesh) && a.dtype === b.dtype && a.shape.length === b.shape.length && a.shape.every((s, i) => s === b.shape[i]) && a.placements.every((p, i) => p.code() === b.placements[i]!.code());
