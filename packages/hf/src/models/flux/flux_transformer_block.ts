// FluxTransformerBlock (double stream): image and text tokens each with their own adaptive
// norms and feed-forward, sharing one attention over the joint sequence (text first).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { FeedForward } from '../attention/feed_forward.js';
import { AdaLayerNormZero, gated, modulatedNorm } from '../normalization/ada_layer_norm.js';
import { FluxAttention, type RotaryTables } from './flux_attention.js';

const clampFloat16 = (x: dt.Tensor) => (x.dtype === 'float16' ? x.clamp(-65504, 65504) : x);

/** diffusers' FluxTransformerBlock (double stream): image and text tokens with their own norms and feed-forwards, one joint attention; checkpoint keys transformer_blocks.N.*. */
export class FluxTransformerBlock extends nn.Module {
  /** The image tokens' adaptive norm (6 chunks). */
  norm1: AdaLayerNormZero;
  /** The text tokens' adaptive norm (6 chunks). */
  norm1_context: AdaLayerNormZero;
  /** The joint attention, with the text tokens' own projections (add_q_proj, ...). */
  attn: FluxAttention;
  /** The image tokens' norm before ff (no weights). */
  norm2: nn.LayerNorm;
  /** The image tokens' feed-forward (tanh GELU). */
  ff: FeedForward;
  /** The text tokens' norm before ff_context (no weights). */
  norm2_context: nn.LayerNorm;
  /** The text tokens' feed-forward (tanh GELU). */
  ff_context: FeedForward;

  constructor(dim: number, numAttentionHeads: number, attentionHeadDim: number, options: ModelOptions) {
    super();
    const { mesh, dtype } = options;
    const plainNorm = () => new nn.LayerNorm(dim, { mesh, dtype, elementwiseAffine: false, eps: 1e-6 });
    this.norm1 = new AdaLayerNormZero(dim, options);
    this.norm1_context = new AdaLayerNormZero(dim, options);
    this.attn = new FluxAttention(dim, { ...options, heads: numAttentionHeads, dimHead: attentionHeadDim, addedKvProjDim: dim, eps: 1e-6 });
    this.norm2 = plainNorm();
    this.ff = new FeedForward(dim, { ...options, activationFn: 'gelu-approximate' });
    this.norm2_context = plainNorm();
    this.ff_context = new FeedForward(dim, { ...options, activationFn: 'gelu-approximate' });
  }

  /** [encoderHidden, hidden] after the block, for hidden [B, S, D], encoderHidden [B, T, D], temb [B, D]. */
  forward(hidden: dt.Tensor, encoderHidden: dt.Tensor, temb: dt.Tensor, rotary: RotaryTables): [dt.Tensor, dt.Tensor] {
    const [normed, gateMsa, shiftMlp, scaleMlp, gateMlp] = this.norm1.forward(hidden, temb);
    const [normedContext, cGateMsa, cShiftMlp, cScaleMlp, cGateMlp] = this.norm1_context.forward(encoderHidden, temb);
    const [attnOut, contextAttnOut] = this.attn.call(normed, normedContext, rotary);
    // the large intermediates are freed as soon as they are read (the block's tidy would hold
    // them to its end: at 1024² that is most of a step's activation memory)
    dt.dispose([normed, normedContext]);

    const h1 = gated(hidden, gateMsa, attnOut);
    const ffIn = modulatedNorm(this.norm2, h1, shiftMlp, scaleMlp);
    const h = gated(h1, gateMlp, this.ff.call(ffIn));
    dt.dispose([attnOut, ffIn, h1]);

    const c1 = gated(encoderHidden, cGateMsa, contextAttnOut!);
    const contextFfIn = modulatedNorm(this.norm2_context, c1, cShiftMlp, cScaleMlp);
    const c = clampFloat16(gated(c1, cGateMlp, this.ff_context.call(contextFfIn)));
    dt.dispose([contextAttnOut!, contextFfIn, c1]);
    return [c, h];
  }
}
