// Where each of a diffusers model's keys lies in a checkpoint of another layout, as data: a
// tensor of the file taken whole (a renamed key), or row ranges of it taken in order (a fused
// qkv split into to_q / to_k / to_v, the (shift, scale) halves of an adaLN swapped). The plan
// only names tensors and rows; load_converted.ts reads them, each rank only its own slice.
import { DTorchError, ErrorCode } from '@dtorch/common';

/** Rows [from, from + rows) along dim 0 of the file's tensor `key` (its key without the file's prefix). */
export interface RowSlice {
  readonly key: string;
  readonly from: number;
  readonly rows: number;
}

/** Where a diffusers key's value is: a tensor of the file whole (its key), or row slices of the file's tensors stacked in order. */
export type KeySource = string | readonly RowSlice[];

/** diffusers key -> its source in the file, for every parameter and buffer of the model. */
export type ConversionPlan = Map<string, KeySource>;

/** The shapes a plan is built against: a tensor's shape by its key in the file (without the prefix); a key the file lacks is an error. */
export type ShapeOf = (key: string) => readonly number[];

/**
 * Builds a ConversionPlan, module by module: `linear` renames a weight and its bias, `split`
 * cuts a fused matrix's rows into modules, `swapHalves` exchanges the two row halves.
 */
export class PlanBuilder {
  readonly plan: ConversionPlan = new Map();
  readonly #shape: ShapeOf;

  constructor(shape: ShapeOf) {
    this.#shape = shape;
  }

  /** The diffusers key `to` is the file's tensor `from`, whole. */
  tensor(to: string, from: string): this {
    this.plan.set(to, from);
    return this;
  }

  /** The linear `to` (weight and bias) is the file's `from`. */
  linear(to: string, from: string): this {
    return this.tensor(`${to}.weight`, `${from}.weight`).tensor(`${to}.bias`, `${from}.bias`);
  }

  /**
   * The fused linear `from` (weight and bias) is the modules `to` stacked by rows, `rows[i]` rows
   * each (diffusers' torch.chunk / torch.split along dim 0); `what` says what the parts are for
   * the error when the rows do not add up.
   */
  split(to: readonly string[], from: string, rows: readonly number[], what: string): this {
    for (const suffix of ['weight', 'bias']) {
      const key = `${from}.${suffix}`;
      const have = this.#shape(key)[0] ?? 0;
      const want = rows.reduce((a, b) => a + b, 0);
      if (have !== want) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `"${key}" has ${have} rows, but the model's config asks for ${want} (${what}: ${rows.join(' + ')}); the file and the config do not belong together`);
      }
      let at = 0;
      to.forEach((module, i) => {
        this.plan.set(`${module}.${suffix}`, [{ key, from: at, rows: rows[i]! }]);
        at += rows[i]!;
      });
    }
    return this;
  }

  /**
   * The linear `to` (weight and bias) is the file's `from` with its two row halves exchanged: the
   * original MMDiT's and BFL's final adaLN emit (shift, scale), diffusers' AdaLayerNormContinuous
   * (scale, shift) (diffusers' swap_scale_shift).
   */
  swapHalves(to: string, from: string): this {
    for (const suffix of ['weight', 'bias']) {
      const key = `${from}.${suffix}`;
      const rows = this.#shape(key)[0] ?? 0;
      if (rows % 2 !== 0) throw new DTorchError(ErrorCode.ShapeMismatch, `"${key}" has ${rows} rows; (shift, scale) halves need an even count`);
      const half = rows / 2;
      this.plan.set(`${to}.${suffix}`, [{ key, from: half, rows: half }, { key, from: 0, rows: half }]);
    }
    return this;
  }
}

/** The file's keys a source reads. */
export function sourceKeys(source: KeySource): string[] {
  return typeof source === 'string' ? [source] : [...new Set(source.map((s) => s.key))];
}
