// FluxSingleTransformerBlock (single stream): the joint sequence (text first) through one
// adaptive norm, attention and a tanh-GELU MLP side by side, their outputs concatenated into
// proj_out (computed block by block: packedLinear), gated, added to the input. With FP8 weights
// the attention's q/k/v and proj_mlp, which read the same normed tokens, run as one matmul: the
// norm's row kernel then quantizes the tokens once for all four (layer_norm_modulate_fp8_linear),
// where apart each would quantize them again. Float weights keep proj_mlp on its own, for the
// GELU in its matmul's epilogue.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { packedLinear } from '../../parallel/packed_rowwise.js';
import { PackedProjections, type HasPackedProjections } from '../attention/packed_projections.js';
import { AdaLayerNormZeroSingle, gated } from '../normalization/ada_layer_norm.js';
import { FluxAttention, type RotaryTables } from './flux_attention.js';

/** diffusers' FluxSingleTransformerBlock (single stream): attention and MLP side by side over the joint sequence; checkpoint keys single_transformer_blocks.N.*. */
export class FluxSingleTransformerBlock extends nn.Module implements HasPackedProjections {
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
  // FP8 q/k/v and proj_mlp in one matmul once packed (see the file's comment)
  readonly #fp8Inputs = new PackedProjections(() => this.#inputLinears());

  constructor(dim: number, numAttentionHeads: number, attentionHeadDim: number, options: ModelOptions, mlpRatio = 4.0) {
    super();
    this.mlpHiddenDim = Math.floor(dim * mlpRatio);
    this.norm = new AdaLayerNormZeroSingle(dim, options);
    this.proj_mlp = new nn.Linear(dim, this.mlpHiddenDim, options);
    this.proj_out = new nn.Linear(dim + this.mlpHiddenDim, dim, options);
    this.attn = new FluxAttention(dim, { ...options, heads: numAttentionHeads, dimHead: attentionHeadDim, preOnly: true, eps: 1e-6 });
    // LoRA: proj_mlp laid wide joins the normed tokens once for its adapters and q/k/v's
    nn.shareLoraJoin(this.proj_mlp, () => this.attn.imageLoraA());
    this.attn.packImageWith(this.#fp8Inputs);
  }

  /**
   * Packs q/k/v and proj_mlp into one buffer when all four hold FP8 weights (see the file's
   * comment); 1 if it did. The attention packs q/k/v alone otherwise (PreTrainedModel.packProjections
   * reaches this block before its attention).
   */
  packProjections(): number {
    if (this.#inputLinears().every((l) => l.weight_scale !== undefined)) return Number(this.#fp8Inputs.pack());
    this.#fp8Inputs.releaseLora(); // what a pack of FP8 weights left
    return 0;
  }

  // The linears reading the normed tokens, as they are now (a replaced submodule is seen).
  #inputLinears(): nn.Linear[] {
    return [this.attn.to_q, this.attn.to_k, this.attn.to_v, this.proj_mlp];
  }

  /** Whether forward() runs q/k/v and proj_mlp as one FP8 matmul (packProjections packed them, none replaced since). */
  get packsFp8Inputs(): boolean {
    return this.#fp8Inputs.packed;
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
    if (this.#fp8Inputs.packed) return this.#finish(joint, gate, ...this.#fp8Forward(normed, rotary));
    const shared = this.#sharedJoin();
    // one LoRA join for proj_mlp and q/k/v, read by nothing else (the norm writes into it)
    const input = shared ? nn.loraJoin(normed, shared.a) : normed;
    if (shared) normed.dispose();
    // in a tidy of its own: the product dies at the GELU in the same segment, so the controller
    // fuses them (the matmul's GELU epilogue on GPUs) wherever the segment ends
    const mlp = dt.tidy(() =>
      dt.F.gelu(shared ? dt.F.linear(input, shared.buffer, this.proj_mlp.bias) : this.proj_mlp.forward(input), { approximate: 'tanh' }),
    );
    const [attnOut] = this.attn.call(input, undefined, rotary, shared ? 'joined' : 'hidden');
    input.dispose(); // freed once read (the block's tidy would hold it to the end)
    return this.#finish(joint, gate, attnOut, mlp);
  }

  // The attention's and the MLP's outputs of the normed tokens, with q/k/v and proj_mlp in one FP8 matmul.
  #fp8Forward(normed: dt.Tensor, rotary: RotaryTables): [dt.Tensor, dt.Tensor] {
    const [q, k, v, hidden] = this.#fp8Inputs.forward(normed) as [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor];
    // the GELU's output dies at proj_out's FP8 product of it, which applies it as it quantizes (gelu_fp8_linear)
    const mlp = dt.F.gelu(hidden, { approximate: 'tanh' });
    const [attnOut] = this.attn.call(normed, undefined, rotary, [q, k, v]);
    dt.dispose([normed, q, k, v, hidden]);
    return [attnOut, mlp];
  }

  // proj_out over the attention's and the MLP's outputs side by side, gated, added to the input.
  #finish(joint: dt.Tensor, gate: dt.Tensor, attnOut: dt.Tensor, mlp: dt.Tensor): dt.Tensor {
    const projected = packedLinear(this.proj_out, [attnOut, mlp]);
    dt.dispose([attnOut, mlp]);
    const out = gated(joint, gate, projected);
    return out.dtype === 'float16' ? out.clamp(-65504, 65504) : out;
  }
}
