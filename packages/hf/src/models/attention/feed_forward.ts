// diffusers' FeedForward (attention.py) with a GELU input projection: net.0.proj (the GELU
// module's linear), net.1 dropout, net.2 the output linear; activation_fn "gelu" or
// "gelu-approximate" (tanh), inner dim = mult · dim. Flux's and SD3's blocks use it.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** diffusers' GELU module: proj, then GELU (tanh-approximated or exact). */
export class GELUProjection extends nn.Module {
  readonly approximate: 'none' | 'tanh';
  proj: nn.Linear;

  constructor(dimIn: number, dimOut: number, approximate: 'none' | 'tanh', options: ModelOptions & { bias?: boolean }) {
    super();
    this.approximate = approximate;
    this.proj = new nn.Linear(dimIn, dimOut, options);
  }

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.gelu(this.proj.forward(x), { approximate: this.approximate });
  }
}

export interface FeedForwardOptions extends ModelOptions {
  dimOut?: number;
  /** Default 4. */
  mult?: number;
  /** "gelu" or "gelu-approximate"; default "geglu" in diffusers, which DTorch does not have yet. */
  activationFn: 'gelu' | 'gelu-approximate';
  innerDim?: number;
  bias?: boolean;
}

export class FeedForward extends nn.Module {
  net: nn.ModuleList;

  constructor(dim: number, options: FeedForwardOptions) {
    super();
    const { dimOut = dim, mult = 4, activationFn, innerDim = Math.floor(dim * mult), bias = true, mesh, dtype } = options;
    if (activationFn !== 'gelu' && activationFn !== 'gelu-approximate') {
      throw new DTorchError(ErrorCode.InvalidArgument, `FeedForward: activation_fn "${String(activationFn)}" is not supported; DTorch has "gelu" and "gelu-approximate"`);
    }
    const approximate = activationFn === 'gelu' ? 'none' : 'tanh';
    this.net = new nn.ModuleList([new GELUProjection(dim, innerDim, approximate, { mesh, dtype, bias }), new nn.Dropout(0), new nn.Linear(innerDim, dimOut, { mesh, dtype, bias })]);
  }

  forward(x: dt.Tensor): dt.Tensor {
    const [act, , out] = [...this.net] as [GELUProjection, nn.Dropout, nn.Linear];
    return out.forward(act.forward(x));
  }
}
