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
    // LoRA: proj_mlp laid wide joins the normed tokens once for its adapters and q/k/v's
    nn.shareLoraJoin(this.proj_mlp, () => this.attn.imageLoraA());
  }

  /**
   * Whether forward() joins the normed tokens once for the LoRA adapters of proj_mlp and of the
   * packed q/k/v (nn.shareLoraJoin): both laid wide, with the same A (DTORCH_LORA_JOIN=0: apart).
   */
  get sharesLoraJoin(): boolean {
    return this.#sharedJoin() !== undefined;
  }

  // proj_mlp's wide layout, where it leads with q/k/v's adapters as they lie now.
  #sharedJoin(): { readonly buffer: dt.Tensor; readonly a: dt.Tensor } | undefined {
    const wide = nn.linearLora(this.proj_mlp)?.wide();
    return wide?.lead && wide.lead === this.attn.imageLoraA() ? wide : undefined;
  }

  /** The joint sequence [B, T + S, D] after the block. */
  forward(joint: dt.Tensor, temb: dt.Tensor, rotary: RotaryTables): dt.Tensor {
    const [normed, gate] = this.norm.forward(joint, temb);
    const shared = this.#sharedJoin();
    // one LoRA join for proj_mlp and q/k/v, read by nothing else (the norm writes into it)
    const input = shared ? nn.loraJoin(normed, shared.a) : normed;
    if (shared) normed.dispose();
    // in a tidy of its own: the product dies at the GELU in the same segment, so the controller
    // fuses them (the matmul's GELU epilogue on GPUs) wherever the segment ends
    const mlp = dt.tidy(() =>
      dt.F.gelu(shared ? dt.F.linear(input, shared.buffer, this.proj_mlp.bias) : this.proj_mlp.forward(input), { approximate: 'tanh' }),
    );
    const [attnOut] = this.attn.call(input, undefined, rotary, shared !== undefined);
    input.dispose(); // freed once read (the block's tidy would hold it to the end)
    const projected = packedLinear(this.proj_out, [attnOut, mlp]);
    dt.dispose([attnOut, mlp]);
    const out = gated(joint, gate, projected);
    return out.dtype === 'float16' ? out.clamp(-65504, 65504) : out;
  }
}
