// Activation layers without parameters: SiLU, GELU (exact or tanh), ReLU.
import * as dt from '@dtorch/api';
import { checkOptions, invalidParameter } from '@dtorch/common';
import { Module } from '../module.js';

export class SiLU extends Module {
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.silu(x);
  }
}

export class ReLU extends Module {
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.relu(x);
  }
}

export class GELU extends Module {
  readonly approximate: 'none' | 'tanh';

  constructor(options?: { approximate?: 'none' | 'tanh' }) {
    super();
    const approximate = checkOptions<{ approximate: 'none' | 'tanh' }>('GELU options', options).approximate ?? 'none';
    if (approximate !== 'none' && approximate !== 'tanh') throw invalidParameter('GELU approximate', "'none' or 'tanh'", approximate);
    this.approximate = approximate;
  }

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.gelu(x, { approximate: this.approximate });
  }

  override extraRepr(): string {
    return this.approximate === 'tanh' ? "approximate='tanh'" : '';
  }
}
