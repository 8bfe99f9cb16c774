// Timestep embeddings as diffusers': sinusoids of each timestep (get_timestep_embedding /
// Timesteps) and the MLP over them (TimestepEmbedding: linear_1, SiLU, linear_2).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';

/** The options of timestepSinusoids (diffusers' get_timestep_embedding arguments). */
export interface SinusoidOptions {
  /** cos before sin (diffusers' flip_sin_to_cos); default false. */
  flipSinToCos?: boolean;
  /** Frequencies spaced by 1 / (dim/2 - shift); default 1. */
  downscaleFreqShift?: number;
  /** Multiplies the arguments of sin and cos; default 1. */
  scale?: number;
  /** The longest period; default 10000. */
  maxPeriod?: number;
}

/**
 * [N, dim] float32 sinusoids of `timesteps` [N]: sin and cos of t · exp(-ln(maxPeriod) · i /
 * (dim/2 - downscaleFreqShift)) for i < dim/2 (an odd dim is zero-padded), computed op for op as
 * diffusers' get_timestep_embedding.
 */
export function timestepSinusoids(timesteps: dt.Tensor, dim: number, options: SinusoidOptions = {}): dt.Tensor {
  const { flipSinToCos = false, downscaleFreqShift = 1, scale = 1, maxPeriod = 10000 } = options;
  const half = Math.floor(dim / 2);
  return dt.tidy(() => {
    const mesh = timesteps.mesh;
    const exponent = dt.arange(0, half, 1, { dtype: 'float32', mesh }).mul(-Math.log(maxPeriod)).div(half - downscaleFreqShift);
    let args = timesteps.to('float32').unsqueeze(1).mul(exponent.exp().unsqueeze(0));
    if (scale !== 1) args = args.mul(scale);
    const [sin, cos] = [args.sin(), args.cos()];
    let emb = flipSinToCos ? dt.cat([cos, sin], -1) : dt.cat([sin, cos], -1);
    if (dim % 2 === 1) emb = dt.cat([emb, dt.zeros([timesteps.shape[0]!, 1], { dtype: 'float32', mesh, placements: emb.placements })], -1);
    return emb;
  });
}

/** diffusers' TimestepEmbedding: linear_1, an activation (default SiLU), linear_2. */
export class TimestepEmbedding extends nn.Module {
  /** The activation between the two linears. */
  readonly act: Activation;
  /** inChannels to timeEmbedDim. */
  linear_1: nn.Linear;
  /** timeEmbedDim to outDim (default timeEmbedDim). */
  linear_2: nn.Linear;

  constructor(inChannels: number, timeEmbedDim: number, options: ModelOptions & { actFn?: string; outDim?: number } = {}) {
    super();
    const { actFn = 'silu', outDim, ...layer } = options;
    this.act = activation(actFn, 'TimestepEmbedding');
    this.linear_1 = new nn.Linear(inChannels, timeEmbedDim, layer);
    this.linear_2 = new nn.Linear(timeEmbedDim, outDim ?? timeEmbedDim, layer);
  }

  /** [N, inChannels] to [N, outDim]. */
  forward(sample: dt.Tensor): dt.Tensor {
    return this.linear_2.forward(this.act(this.linear_1.forward(sample)));
  }
}
