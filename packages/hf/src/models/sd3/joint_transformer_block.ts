// JointTransformerBlock (MMDiT): the image and text streams each modulated by the conditioning
// vector (norm1 / norm1_context), one joint attention over both, then per-stream gated
// residuals and feed-forwards. SD3.5's dual-attention blocks add a second, image-only attention
// (attn2) on a second modulation of the image stream. The last block is context_pre_only: its
// text stream feeds the attention and nothing after it.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { SD3QkNorm } from './sd3_transformer_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { FeedForward } from '../attention/feed_forward.js';
import { AdaLayerNormContinuous, AdaLayerNormZero, gated, modulatedNorm } from '../normalization/ada_layer_norm.js';
import { SD3Attention } from './joint_attention.js';
import { SD35AdaLayerNormZeroX } from './sd35_ada_layer_norm_zero_x.js';

/** @inline Where the weights live, both given. */
type Layout = Required<ModelOptions>;

/** What a JointTransformerBlock has (from the config, per block). */
export interface JointBlockOptions {
  /** The config's num_attention_heads. */
  heads: number;
  /** The config's attention_head_dim. */
  headDim: number;
  /** The config's qk_norm. */
  qkNorm: SD3QkNorm | null;
  /** The last block: its text stream feeds the attention and nothing after it. */
  contextPreOnly: boolean;
  /** A block of the config's dual_attention_layers (SD3.5): a second, image-only attention. */
  dualAttention: boolean;
}

/** diffusers' JointTransformerBlock (MMDiT): both streams modulated by the conditioning vector, one joint attention, per-stream feed-forwards; checkpoint keys transformer_blocks.N.*. */
export class JointTransformerBlock extends nn.Module {
  /** The last block: no text output (diffusers' context_pre_only). */
  readonly contextPreOnly: boolean;
  /** The image stream's adaptive norm: AdaLayerNormZero, or SD35AdaLayerNormZeroX in dual-attention blocks. */
  norm1: AdaLayerNormZero | SD35AdaLayerNormZeroX;
  /** The text stream's adaptive norm: AdaLayerNormZero, or AdaLayerNormContinuous in the last block. */
  norm1_context: AdaLayerNormZero | AdaLayerNormContinuous;
  /** The joint attention over both streams. */
  attn: SD3Attention;
  /** The second, image-only attention of SD3.5's dual-attention blocks; else undefined. */
  attn2: SD3Attention | undefined;
  /** The image stream's norm before ff (no weights). */
  norm2: nn.LayerNorm;
  /** The image stream's feed-forward (tanh GELU). */
  ff: FeedForward;
  /** The text stream's norm before ff_context; undefined in the last block. */
  norm2_context: nn.LayerNorm | undefined;
  /** The text stream's feed-forward; undefined in the last block. */
  ff_context: FeedForward | undefined;

  constructor(dim: number, o: JointBlockOptions, options: Layout) {
    super();
    this.contextPreOnly = o.contextPreOnly;
    const attention = { heads: o.heads, headDim: o.headDim, qkNorm: o.qkNorm };
    const plainNorm = () => new nn.LayerNorm(dim, { ...options, eps: 1e-6, elementwiseAffine: false });
    const feedForward = () => new FeedForward(dim, { ...options, activationFn: 'gelu-approximate' });
    this.norm1 = o.dualAttention ? new SD35AdaLayerNormZeroX(dim, options) : new AdaLayerNormZero(dim, options);
    this.norm1_context = o.contextPreOnly ? new AdaLayerNormContinuous(dim, dim, { ...options, elementwiseAffine: false, eps: 1e-6 }) : new AdaLayerNormZero(dim, options);
    this.attn = new SD3Attention(dim, { ...attention, joint: true, contextPreOnly: o.contextPreOnly }, options);
    this.attn2 = o.dualAttention ? new SD3Attention(dim, { ...attention, joint: false, contextPreOnly: false }, options) : undefined;
    this.norm2 = plainNorm();
    this.ff = feedForward();
    this.norm2_context = o.contextPreOnly ? undefined : plainNorm();
    this.ff_context = o.contextPreOnly ? undefined : feedForward();
  }

  /**
   * One step of both streams: [text, image] as diffusers returns them (text undefined after the
   * last block). `projections`: the norms' linear(SiLU(temb)) by norm, computed already
   * (AdaLNProjections); each norm computes its own where absent.
   */
  forward(hidden: dt.Tensor, context: dt.Tensor, temb: dt.Tensor, projections?: ReadonlyMap<nn.Module, dt.Tensor>): [dt.Tensor | undefined, dt.Tensor] {
    // SD35AdaLayerNormZeroX also gives the second attention's input and gate
    const [normed, gateMsa, shiftMlp, scaleMlp, gateMlp, normed2, gateMsa2] = this.norm1.forward(hidden, temb, projections?.get(this.norm1)) as [
      ...ReturnType<AdaLayerNormZero['forward']>,
      dt.Tensor?,
      dt.Tensor?,
    ];
    // the last block's text stream only feeds the attention (AdaLayerNormContinuous, no gates)
    const textProjected = projections?.get(this.norm1_context);
    const text = this.norm1_context instanceof AdaLayerNormZero ? this.norm1_context.forward(context, temb, textProjected) : undefined;
    const normedText = text ? text[0] : (this.norm1_context as AdaLayerNormContinuous).forward(context, temb, textProjected);
    const [attnOut, contextAttnOut] = this.attn.call(normed, normedText);
    // the large intermediates are freed as soon as they are read (the block's tidy would hold
    // them all to its end)
    dt.dispose([normed, normedText]);
    let h = gated(hidden, gateMsa, attnOut);
    attnOut.dispose();
    if (this.attn2 && normed2 && gateMsa2) {
      const [attn2Out] = this.attn2.call(normed2);
      const h2 = gated(h, gateMsa2, attn2Out);
      dt.dispose([normed2, attn2Out, h]);
      h = h2;
    }
    const ffIn = modulatedNorm(this.norm2, h, shiftMlp, scaleMlp);
    const out = gated(h, gateMlp, this.ff.call(ffIn));
    dt.dispose([ffIn, h]);
    if (!text) return [undefined, out];
    const [, cGateMsa, cShiftMlp, cScaleMlp, cGateMlp] = text;
    const c = gated(context, cGateMsa, contextAttnOut!);
    const contextFfIn = modulatedNorm(this.norm2_context!, c, cShiftMlp, cScaleMlp);
    const contextOut = gated(c, cGateMlp, this.ff_context!.call(contextFfIn));
    dt.dispose([contextAttnOut!, contextFfIn, c]);
    return [contextOut, out];
  }
}
