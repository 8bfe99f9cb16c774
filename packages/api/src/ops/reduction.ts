// Reductions: sum over all dims or the given ones, with keepdim.
import { checkBoolean, checkInteger, invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { output } from '../record.js';
import { Tensor } from '../tensor.js';

function dimsOf(dim: number | readonly number[] | undefined): readonly number[] {
  if (dim === undefined) return [];
  if (typeof dim === 'number') return [checkInteger('sum dim', dim)];
  if (!Array.isArray(dim)) throw invalidParameter('sum dim', 'integer or array of integers', dim);
  return dim.map((d) => checkInteger('sum dim', d));
}

/** Sum over `dim` (all dims when omitted); integer and bool inputs give int64, as in PyTorch. */
export function sum(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter('sum input', 'Tensor', x);
  checkBoolean('sum keepdim', keepdim);
  const dims = dimsOf(dim);
  const e = engine();
  const args = e.args;
  args[0] = x.id;
  args[1] = keepdim ? 1 : 0;
  args[2] = dims.length;
  dims.forEach((d, i) => (args[3 + i] = d));
  e.record(e.ops['sum']!.code, 1, 2 + dims.length);
  return output(x.mesh);
}
