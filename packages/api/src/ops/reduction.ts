// Reductions: sum and mean over all dims or the given ones, with keepdim.
import { checkBoolean, checkInteger, invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { output } from '../record.js';
import { Tensor } from '../tensor.js';

function dimsOf(op: string, dim: number | readonly number[] | undefined): readonly number[] {
  if (dim === undefined) return [];
  if (typeof dim === 'number') return [checkInteger(`${op} dim`, dim)];
  if (!Array.isArray(dim)) throw invalidParameter(`${op} dim`, 'integer or array of integers', dim);
  return dim.map((d) => checkInteger(`${op} dim`, d));
}

function reduce(op: 'sum' | 'mean', x: Tensor, dim: number | readonly number[] | undefined, keepdim: boolean): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter(`${op} input`, 'Tensor', x);
  checkBoolean(`${op} keepdim`, keepdim);
  const dims = dimsOf(op, dim);
  const e = engine();
  const args = e.args;
  args[0] = x.id;
  args[1] = keepdim ? 1 : 0;
  args[2] = dims.length;
  dims.forEach((d, i) => (args[3 + i] = d));
  e.record(e.ops[op]!.code, 1, 2 + dims.length);
  return output(x.mesh);
}

/**
 * Sum over `dim` (all dims when omitted); integer and bool inputs give int64, as in PyTorch.
 * Summing a sharded dim leaves a Partial(sum) result: no communication until it is read or
 * redistributed.
 */
export function sum(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  return reduce('sum', x, dim, keepdim);
}

/** Mean over `dim` (all dims when omitted) of a floating tensor; a sharded reduced dim gives Partial(sum). */
export function mean(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  return reduce('mean', x, dim, keepdim);
}
