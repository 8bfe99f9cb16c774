// The LoRA adapters of linears that run as one matmul (weights packed side by side, one input):
// every running adapter's A stacked into one [Σ rank, in] and every B (times its scale) placed
// on its linear's rows of one block-diagonal [Σ out, Σ rank]. The packed product then reads its
// input once for all the adapters (where one linear at a time reads it once per adapter) and
// accumulates once into the base matmul's output (linear_lora.ts). The zero blocks cost
// Σ rank multiply-adds per output element: small beside the base's `in`.
import * as dt from '@dtorch/api';
import type { Linear } from '../layers/linear.js';
import { linearDtype } from '../quantization/fp8.js';
import { linearLora } from './linear_lora.js';

/** The stacked A and block-diagonal B of some linears' running adapters (see the file's comment). */
export interface PackedLoraFactors {
  /** [Σ rank, in]. */
  readonly a: dt.Tensor;
  /** [Σ out, Σ rank], each adapter's B times its scale on its linear's rows and its own columns. */
  readonly b: dt.Tensor;
}

/** A key that changes when any of `linears`' adapters change (a cache of their factors is stale then). */
export function packedLoraKey(linears: readonly Linear[]): string {
  return linears.map((l) => linearLora(l)?.version ?? 0).join(',');
}

/**
 * The running adapters of `linears` (whole weights of one input width, in the packed order) as
 * one A and one B; undefined when none runs. New tensors: the caller keeps and disposes them.
 */
export function packLoraFactors(linears: readonly Linear[]): PackedLoraFactors | undefined {
  const running = linears.map((l) => linearLora(l)?.running() ?? []);
  const ranks = running.map((adapters) => adapters.map((r) => r.a.shape[0]!));
  const total = ranks.flat().reduce((s, r) => s + r, 0);
  if (total === 0) return undefined;
  return dt.tidy(() => {
    const a = dt.cat(running.flat().map((r) => r.a), 0);
    const { mesh } = linears[0]!.weight;
    const dtype = linearDtype(linears[0]!); // the adapters' dtype (an FP8 weight's float one)
    let column = 0;
    const rows = linears.map((l, i) => {
      const blocks: dt.Tensor[] = [];
      if (column > 0) blocks.push(dt.zeros([l.outFeatures, column], { mesh, dtype }));
      for (const r of running[i]!) blocks.push(r.b);
      column += ranks[i]!.reduce((s, r) => s + r, 0);
      if (column < total) blocks.push(dt.zeros([l.outFeatures, total - column], { mesh, dtype }));
      return blocks.length === 1 ? blocks[0]! : dt.cat(blocks, 1);
    });
    return { a, b: dt.cat(rows, 0) };
  });
}
