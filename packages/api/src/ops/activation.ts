// Activations: the elementwise ops torch.nn.functional has, softmax and logSoftmax among them
// (its "non-linear activations"). Each is a dt export and a dt.F one.
import { checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import type { OpsWithAttrs } from '@dtorch/core';
import { checkTensor, recordOp, recordUnary } from '../record.js';
import type { Tensor } from '../tensor.js';

/**
 * max(x, 0), as torch.relu; same dtype (bool refused).
 * @see {@link Tensor.relu}
 */
export const relu = (x: Tensor): Tensor => recordUnary('relu', x);
/**
 * Hyperbolic tangent, as torch.tanh; integer and bool inputs give float32.
 * @see {@link Tensor.tanh}
 */
export const tanh = (x: Tensor): Tensor => recordUnary('tanh', x);
/**
 * 1 / (1 + e^-x), as torch.sigmoid; integer and bool inputs give float32.
 * @see {@link Tensor.sigmoid}
 */
export const sigmoid = (x: Tensor): Tensor => recordUnary('sigmoid', x);
/**
 * x · sigmoid(x) of a floating tensor, as torch.nn.functional.silu; same dtype.
 * @see {@link Tensor.silu}
 */
export const silu = (x: Tensor): Tensor => recordUnary('silu', x);
/**
 * x · sigmoid(1.702 x): CLIP's activation (transformers' QuickGELUActivation), as one op.
 * @see {@link Tensor.quickGelu}
 */
export const quickGelu = (x: Tensor): Tensor => recordUnary('quick_gelu', x);

/** GELU; `approximate: 'tanh'` is the tanh approximation. */
export function gelu(x: Tensor, options?: { approximate?: 'none' | 'tanh' }): Tensor {
  const approximate = checkKnownOptions<{ approximate: string }>('gelu options', options, ['approximate']).approximate ?? 'none';
  if (approximate !== 'none' && approximate !== 'tanh') throw invalidParameter('gelu approximate', "'none' or 'tanh'", approximate);
  return recordUnary('gelu', x, [approximate === 'tanh' ? 1 : 0]);
}

function alongDim(op: OpsWithAttrs<readonly [dim: number]>, x: Tensor, dim: number): Tensor {
  checkTensor(`${op} input`, x);
  checkInteger(`${op} dim`, dim);
  return recordOp(op, [x], [dim]);
}
/**
 * Softmax along `dim`; other dims may be sharded.
 * @see {@link Tensor.softmax}
 */
export const softmax = (x: Tensor, dim: number): Tensor => alongDim('softmax', x, dim);
/**
 * log(softmax(x)) along `dim`, computed stably, as torch.log_softmax; other dims may be sharded.
 * @see {@link Tensor.logSoftmax}
 */
export const logSoftmax = (x: Tensor, dim: number): Tensor => alongDim('log_softmax', x, dim);
