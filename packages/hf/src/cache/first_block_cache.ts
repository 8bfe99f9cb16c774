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
// keeps one cache for the batch as diffusers' batched pipelines do (SD3's), or, where only the
// mesh batches them (Flux's on a 'cfg' dim), one per half (BOTH_BRANCHES), each half deciding as
// its own call would. The statistic is a mean over every element of the call (or half), so on
// a mesh (tokens over 'ulysses', the batch over 'cfg' / 'dp') the devices' parts are gathered
// before the host reads it: every device takes the decision one device would (the one program
// takes it once for all). As diffusers computes it in the residual's dtype (each mean and their
// quotient a bfloat16 under bf16), the host rounds the means and the quotient to that dtype: the
// statistics a bf16 run compares with the threshold are the values diffusers' would be.
//
// The host reads the statistic between the first block and the rest: the step's recorded work is
// cut there, and the engine recognises (and on a GPU replays as CUDA graphs) the first block's
// part, the remaining blocks' part and the cached part each as their own segments.
import * as dt from '@dtorch/api';
import type { FirstBlockCacheConfig } from './cache_config.js';
import { StepCache, replicated, sameLayout, type BlockCache, type FirstBlockRun } from './step_cache.js';

// a context's cache: the first block's residual and the tail residual of the last call that ran every block
interface ContextState {
  head: dt.Tensor;
  tail: dt.Tensor;
}

/** A transformer's First-Block Cache: its contexts' residuals and the decisions taken so far. */
export class FirstBlockCache extends StepCache implements BlockCache {
  readonly config: Required<FirstBlockCacheConfig>;
  readonly #states = new Map<string, ContextState>();

  constructor(config: Required<FirstBlockCacheConfig>) {
    super();
    this.config = config;
  }

  /** The residual change above which the remaining blocks run. */
  get threshold(): number {
    return this.config.threshold;
  }

  /**
   * The image hidden states after the model's last block, for the first block's input `input`
   * (image tokens): `first()` runs the first block; its `rest()` the others when the cache says so.
   */
  run(input: dt.Tensor, first: () => FirstBlockRun): dt.Tensor {
    const key = this.context;
    // the rows' branches: one context, or the two halves of a batch [negative; positive]
    const branches = this.branches;
    const { hidden, rest } = first();
    const residual = hidden.sub(input);
    let state = this.#states.get(key);
    if (state && !sameLayout(state.head, residual)) {
      // another size or batch in this context: start over
      this.#drop(key);
      state = undefined;
    }
    const statistics = state ? this.#statistics(residual, state.head, branches.length) : branches.map(() => undefined);
    const computed = statistics.map((s) => s === undefined || s > this.threshold);
    this.decided(statistics, computed);
    if (computed.every((c) => !c)) {
      residual.dispose();
      return hidden.add(state!.tail);
    }
    const out = rest();
    const tail = out.sub(hidden);
    if (computed.every((c) => c)) {
      this.#drop(key);
      this.#states.set(key, { head: dt.keep(residual), tail: dt.keep(tail) });
      return out;
    }
    // one branch ran the blocks, the other reuses its cache: each half as its own call gives it
    const fresh = rowsWhere(computed, hidden);
    const next = { head: dt.keep(residual.where(fresh, state!.head)), tail: dt.keep(tail.where(fresh, state!.tail)) };
    const result = out.where(fresh, hidden.add(state!.tail));
    this.#drop(key);
    this.#states.set(key, next);
    return result;
  }

  protected forget(): void {
    for (const name of [...this.#states.keys()]) this.#drop(name);
  }

  // absmean(r − r_prev) / absmean(r_prev) over each of `groups` equal groups of rows, read on
  // the host (see the file's comment): per-row means (every row has as many elements) gathered
  // from every device, summed per group
  #statistics(residual: dt.Tensor, previous: dt.Tensor, groups: number): number[] {
    const dims = residual.shape.map((_, i) => i).slice(1);
    const rows = dt.tidy(() => replicated(dt.stack([residual.sub(previous).abs().mean(dims), previous.abs().mean(dims)])));
    let values: ArrayLike<number>;
    try {
      values = rows.dataSync() as ArrayLike<number>;
    } finally {
      rows.dispose();
    }
    const batch = residual.shape[0]!;
    const per = batch / groups;
    const round = (x: number) => roundToDtype(x, residual.dtype);
    return Array.from({ length: groups }, (_, g) => {
      let [change, size] = [0, 0];
      for (let i = g * per; i < (g + 1) * per; i++) [change, size] = [change + values[i]!, size + values[batch + i]!];
      return round(round(change / per) / round(size / per));
    });
  }

  #drop(name: string): void {
    const state = this.#states.get(name);
    if (!state) return;
    dt.dispose([state.head, state.tail]);
    this.#states.delete(name);
  }
}

// true on the rows of the groups that ran the blocks, as [batch, 1, ...] placed as `like`'s batch
function rowsWhere(computed: readonly boolean[], like: dt.Tensor): dt.Tensor {
  const batch = like.shape[0]!;
  const per = batch / computed.length;
  const rows = Array.from({ length: batch }, (_, i) => computed[Math.floor(i / per)]!);
  const placements = like.placements.map((p) => (p.isShard(0) ? dt.Shard(0) : dt.Replicate()));
  return dt.tensor(rows, { dtype: 'bool', mesh: like.mesh, placements, shape: [batch, ...like.shape.slice(1).map(() => 1)] });
}

/**
 * `x` rounded to the nearest value of `dtype` (to nearest even, as a cast on the device rounds):
 * bfloat16 keeps 8 bits of mantissa, float16 11 (normal numbers), float32 24; float64 as it is.
 */
export function roundToDtype(x: number, dtype: dt.DType): number {
  if (dtype === 'float64' || !Number.isFinite(x)) return x;
  const f = new Float32Array([x]);
  if (dtype === 'float32') return f[0]!;
  const bits = new Uint32Array(f.buffer);
  const drop = dtype === 'bfloat16' ? 16 : dtype === 'float16' ? 13 : 0;
  if (drop === 0) return f[0]!;
  const half = 2 ** (drop - 1) - 1;
  bits[0] = ((bits[0]! + half + ((bits[0]! >>> drop) & 1)) >>> drop) << drop;
  return f[0]!;
}
