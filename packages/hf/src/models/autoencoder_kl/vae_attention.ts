// The VAE mid block's self-attention over pixels (diffusers' Attention as UNetMidBlock2D builds
// it: a group norm first, one head per block_out_channels[-1] channels, biases, the input added
// back). Keys group_norm, to_q, to_k, to_v, to_out.0; checkpoints of the older attention block
// (query, key, value, proj_attn) load through AutoencoderKL.keyAliases.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** diffusers' Attention as the VAE's mid block has it: group norm, self-attention over pixels, the input added back; checkpoint keys mid_block.attentions.0.*. */
export class VAEAttention extends nn.Module {
  /** Attention heads: channels / headDim (one, in the VAE). */
  readonly heads: number;
  /** The norm before the projections. */
  group_norm: nn.GroupNorm;
  /** channels to channels. */
  to_q: nn.Linear;
  /** channels to channels. */
  to_k: nn.Linear;
  /** channels to channels. */
  to_v: nn.Linear;
  /** to_out.0, channels to channels (diffusers' to_out.1 is a dropout, not kept). */
  to_out: nn.ModuleList<nn.Linear>;

  constructor(channels: number, headDim: number, groups: number, eps: number, options: ModelOptions) {
    super();
    this.heads = channels / headDim;
    this.group_norm = new nn.GroupNorm(groups, channels, { ...options, eps });
    this.to_q = new nn.Linear(channels, channels, options);
    this.to_k = new nn.Linear(channels, channels, options);
    this.to_v = new nn.Linear(channels, channels, options);
    this.to_out = new nn.ModuleList([new nn.Linear(channels, channels, options)]); // to_out.1 is a dropout
  }

  /** x [batch, channels, height, width] → the same shape. */
  forward(x: dt.Tensor): dt.Tensor {
    const [batch, channels, height, width] = x.shape as [number, number, number, number];
    // pixels as a sequence [batch, height * width, channels]
    const tokens = this.group_norm.forward(x).reshape([batch, channels, height * width]).transpose(1, 2);
    const out = dt.F.scaledDotProductAttention(this.to_q.forward(tokens), this.to_k.forward(tokens), this.to_v.forward(tokens), { heads: this.heads });
    const projected = this.to_out.at(0).forward(out);
    return projected.transpose(1, 2).reshape([batch, channels, height, width]).add(x);
  }
}
