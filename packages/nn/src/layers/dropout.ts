// Dropout: the identity in eval mode (inference, the default); in training mode it zeroes each
// element with probability p and scales the rest by 1 / (1 - p), as torch.nn.Dropout.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkNumber } from '@dtorch/common';
import { Module } from '../module.js';

/**
 * As torch.nn.Dropout: `new Dropout(p)`, p default 0.5. The identity in eval mode (the
 * default); in training mode (train()) it zeroes each element with probability p and scales
 * the rest by 1 / (1 - p).
 */
export class Dropout extends Module {
  /** Probability of zeroing an element, in [0, 1]. */
  readonly p: number;

  constructor(p = 0.5) {
    super();
    if (checkNumber('Dropout p', p) < 0 || p > 1) throw new DTorchError(ErrorCode.InvalidArgument, `Dropout: p must be in [0, 1], got ${p}`);
    this.p = p;
  }

  /** `x` itself in eval mode (or p = 0); else a new tensor of the same shape, a fresh mask each call. */
  forward(x: dt.Tensor): dt.Tensor {
    if (!this.training || this.p === 0) return x;
    if (this.p === 1) return dt.zerosLike(x);
    const keepMask = dt.rand(x.shape, { mesh: x.mesh, placements: x.placements.map((p) => (p.isPartial() ? dt.Replicate() : p)) }).ge(this.p);
    return x.mul(keepMask.to(x.dtype)).div(1 - this.p);
  }

  override extraRepr(): string {
    return `p=${this.p}`;
  }
}
