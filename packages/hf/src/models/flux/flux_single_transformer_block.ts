// FluxSingleTransformerBlock (single stream): the joint sequence (text first) through one
// adaptive norm, attention and a tanh-GELU MLP side by side, their outputs concatenated into
// proj_out (computed block by block: packedLinear), gated, added to the input.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { packedLinear } from '../../parallel/packed_rowwise.js';
import { AdaLayerNormZeroSingle, gated } from '../normalization/ada_layer_norm.js';
import { FluxAttention, type RotaryTables } from './flux_attention.js';

/** diffusers' FluxSingleTransformerBlock (single stream): attention and MLP side by side over the joint sequence; checkpoint keys single_transformer_blocks.N.*. */
export class FluxSingleTransformerBlock extends nn.Module {
  /** The MLP's width: dim x mlpRatio (4). */
  readonly mlpHiddenDim: number;
  /** The adaptive norm (3 chunks: shift, scale, gate). */
  norm: AdaLayerNormZeroSingle;
  /** The MLP's input: dim to mlpHiddenDim, then tanh GELU. */
  proj_mlp: nn.Linear;
  /** The attention's and the MLP's outputs side by side, dim + mlpHiddenDim to dim. */
  proj_out: nn.Linear;
  /** The attention, without an output projection (pre_only). */
  attn: FluxAttention;

  constructor(dim: number, numAttentionHeads: number, attentionHeadDim: number, options: ModelOptions, mlpRatio = 4.0) {
    super();
    this.mlpHiddenDim = Math.floor(dim * mlpRatio);
    this.norm = new AdaLayerNormZeroSingle(dim, options);
    this.proj_mlp = new nn.Linear(dim, this.mlpHiddenDim, options);
    this.proj_out = new nn.Linear(dim + this.mlpHiddenDim, dim, options);
    this.attn = new FluxAttention(dim, { ...options, heads: numAttentionHeads, dimHead: attentionHeadDim, preOnly: true, eps: 1e-6 });
  }

  /** The joint sequence [B, T + S, D] after the block. */
  forward(joint: dt.Tensor, temb: dt.Tensor, rotary: RotaryTables): dt.Tensor {
    const [normed, gate] = this.norm.forward(joint, temb);
    // in a tidy of its own: the product dies at the GELU in the same segment, so the controller
    // fuses them (the matmul's GELU epilogue on GPUs) wherever the segment ends
    const mlp = dt.tidy(() => dt.F.gelu(this.proj_mlp.forward(normed), { approximate: 'tanh' }));
    const [attnOut] = this.attn.call(normed, undefined, rotary);
    normed.dispose(); // freed once read (the block's tidy would hold it to the end)
    const projected = packedLinear(this.proj_out, [attnOut, mlp]);
    dt.dispose([attnOut, mlp]);
    const out = gated(joint, gate, projected);
    return out.dtype === 'float16' ? out.clamp(-65504, 65504) : out;
  }
}
