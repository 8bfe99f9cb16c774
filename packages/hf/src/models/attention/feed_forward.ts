// diffusers' FeedForward (attention.py) with a GELU input projection: net.0.proj (the GELU
// module's linear), net.1 dropout, net.2 the output linear; activation_fn "gelu" or
// "gelu-approximate" (tanh), inner dim = mult · dim. Flux's and SD3's blocks use it.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** diffusers' GELU module: proj, then GELU (tanh-approximated or exact). */
export class GELUProjection extends nn.Module {
  /** 'tanh' for diffusers' "gelu-approximate", 'none' for "gelu". */
  readonly approximate: 'none' | 'tanh';
  /** dimIn to dimOut (checkpoint keys net.0.proj.*). */
  proj: nn.Linear;

  constructor(dimIn: number, dimOut: number, approximate: 'none' | 'tanh', options: ModelOptions & { bias?: boolean }) {
    super();
    this.approximate = approximate;
    this.proj = new nn.Linear(dimIn, dimOut, options);
  }

  /** GELU(proj(x)). */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.gelu(this.proj.forward(x), { approximate: this.approximate });
  }
}

/** The options of FeedForward (diffusers' constructor arguments, camelCase). */
export interface FeedForwardOptions extends ModelOptions {
  /** The output width; default dim. */
  dimOut?: number;
  /** Default 4. */
  mult?: number;
  /** "gelu" or "gelu-approximate"; default "geglu" in diffusers, which DTorch does not have yet. */
  activationFn: 'gelu' | 'gelu-approximate';
  /** The hidden width; default mult x dim. */
  innerDim?: number;
  /** Biases on both linears; default true. */
  bias?: boolean;
}

/** diffusers' FeedForward with a GELU projection: net.2(GELU(net.0.proj(x))). */
export class FeedForward extends nn.Module {
  /** diffusers' `net`: net.0 the GELUProjection, net.1 a dropout (no weights), net.2 innerDim to dimOut. */
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

  /** [..., dim] to [..., dimOut]. */
  forward(x: dt.Tensor): dt.Tensor {
    const [act, , out] = [...this.net] as [GELUProjection, nn.Dropout, nn.Linear];
    return out.forward(act.forward(x));
  }
}
