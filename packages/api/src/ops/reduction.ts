// Reductions over all dims or the given ones: sum, mean, any, all (with keepdim), and max, min
// and argmax over all dims or one.
import { checkBoolean, checkInteger, invalidParameter } from '@dtorch/common';
import type { OpsWithAttrs } from '@dtorch/core';
import { recordOp, recordOpOutputs } from '../record.js';
import { Tensor } from '../tensor.js';

function dimsOf(op: string, dim: number | readonly number[] | undefined): readonly number[] {
  if (dim === undefined) return [];
  if (typeof dim === 'number') return [checkInteger(`${op} dim`, dim)];
  if (!Array.isArray(dim)) throw invalidParameter(`${op} dim`, 'integer or array of integers', dim);
  return dim.map((d) => checkInteger(`${op} dim`, d));
}

function reduce(op: 'sum' | 'mean' | 'any' | 'all', x: Tensor, dim: number | readonly number[] | undefined, keepdim: boolean): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter(`${op} input`, 'Tensor', x);
  checkBoolean(`${op} keepdim`, keepdim);
  const dims = dimsOf(op, dim);
  return recordOp(op, [x], [keepdim ? 1 : 0, dims.length, ...dims]);
}

/**
 * Sum over `dim` (all dims when omitted); integer and bool inputs give int64, as in PyTorch.
 * Summing a sharded dim leaves a Partial(sum) result: no communication until it is read or
 * redistributed.
 * @see {@link Tensor.sum}
 */
export function sum(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  return reduce('sum', x, dim, keepdim);
}

/**
 * Mean over `dim` (all dims when omitted) of a floating tensor; a sharded reduced dim gives
 * Partial(sum).
 * @see {@link Tensor.mean}
 */
export function mean(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  return reduce('mean', x, dim, keepdim);
}

function logical(op: 'any' | 'all', x: Tensor, dim: number | readonly number[] | undefined, keepdim: boolean): Tensor {
  return reduce(op, x, dim, keepdim);
}
/**
 * Whether any element (along `dim`) is true/nonzero: bool (uint8 for uint8 input, as torch.any).
 * @see {@link Tensor.any}
 */
export const any = (x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor => logical('any', x, dim, keepdim);
/**
 * Whether every element (along `dim`) is true/nonzero: bool (uint8 for uint8 input, as torch.all).
 * @see {@link Tensor.all}
 */
export const all = (x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor => logical('all', x, dim, keepdim);

function dimCall(op: OpsWithAttrs<readonly [hasDim: number, dim: number, keepdim: number]>, x: Tensor, dim: number | undefined, keepdim: boolean): Tensor[] {
  if (!(x instanceof Tensor)) throw invalidParameter(`${op} input`, 'Tensor', x);
  if (dim !== undefined) checkInteger(`${op} dim`, dim);
  checkBoolean(`${op} keepdim`, keepdim);
  return recordOpOutputs(op, [x], [dim === undefined ? 0 : 1, dim ?? 0, keepdim ? 1 : 0]);
}

/** What {@link max} and {@link min} along a dim return, as torch's (values, indices) pair. */
export interface ValuesIndices {
  /** The largest (or smallest) values along the dim, which is dropped unless keepdim. */
  values: Tensor;
  /** Their int64 positions along the dim, of the same shape as `values`. */
  indices: Tensor;
}

/**
 * The largest value (0-d), or along `dim` the largest values and their indices, as torch.max.
 * @see {@link Tensor.max}
 */
export function max(x: Tensor): Tensor;
export function max(x: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function max(x: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  const [values, indices] = dimCall('max', x, dim, keepdim);
  return indices ? { values: values!, indices } : values!;
}

/**
 * The smallest value (0-d), or along `dim` the smallest values and their indices, as torch.min.
 * @see {@link Tensor.min}
 */
export function min(x: Tensor): Tensor;
export function min(x: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function min(x: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  const [values, indices] = dimCall('min', x, dim, keepdim);
  return indices ? { values: values!, indices } : values!;
}

/**
 * Index of the largest value: in the flattened tensor, or along `dim`.
 * @see {@link Tensor.argmax}
 */
export function argmax(x: Tensor, dim?: number, keepdim = false): Tensor {
  return dimCall('argmax', x, dim, keepdim)[0]!;
}
