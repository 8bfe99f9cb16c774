// Activation layers without parameters: SiLU, GELU (exact or tanh), ReLU.
import * as dt from '@dtorch/api';
import { checkOptions, invalidParameter } from '@dtorch/common';
import { Module } from '../module.js';

/** x · sigmoid(x) elementwise, as torch.nn.SiLU. */
export class SiLU extends Module {
  /** silu(x), the same shape as `x`. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.silu(x);
  }
}

/** max(x, 0) elementwise, as torch.nn.ReLU. */
export class ReLU extends Module {
  /** relu(x), the same shape as `x`. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.relu(x);
  }
}

/**
 * The Gaussian error linear unit, as torch.nn.GELU: `new GELU()` is exact (erf),
 * `new GELU({ approximate: 'tanh' })` the tanh approximation.
 */
export class GELU extends Module {
  /** 'none' (default): x · Φ(x) with the exact normal CDF; 'tanh': its tanh approximation. */
  readonly approximate: 'none' | 'tanh';

  constructor(options?: { approximate?: 'none' | 'tanh' }) {
    super();
    const approximate = checkOptions<{ approximate: 'none' | 'tanh' }>('GELU options', options).approximate ?? 'none';
    if (approximate !== 'none' && approximate !== 'tanh') throw invalidParameter('GELU approximate', "'none' or 'tanh'", approximate);
    this.approximate = approximate;
  }

  /** gelu(x), the same shape as `x`. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.gelu(x, { approximate: this.approximate });
  }

  override extraRepr(): string {
    return this.approximate === 'tanh' ? "approximate='tanh'" : '';
  }
}
