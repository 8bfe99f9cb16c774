// CLIPAttention: q/k/v/out projections with biases, scaled dot-product attention over heads.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { CLIPTextConfig } from '../../configs/clip_text_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** transformers' CLIPAttention: multi-head self-attention, projections with biases; a layer's self_attn. */
export class CLIPAttention extends nn.Module {
  /** The config's num_attention_heads. */
  readonly numHeads: number;
  /** Each head's width, hiddenSize / numHeads. */
  readonly headDim: number;
  /** hiddenSize to hiddenSize. */
  k_proj: nn.Linear;
  /** hiddenSize to hiddenSize. */
  v_proj: nn.Linear;
  /** hiddenSize to hiddenSize. */
  q_proj: nn.Linear;
  /** hiddenSize to hiddenSize, after the heads are joined. */
  out_proj: nn.Linear;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.numHeads = config.numAttentionHeads;
    this.headDim = config.headDim;
    const d = config.hiddenSize;
    this.k_proj = new nn.Linear(d, d, options);
    this.v_proj = new nn.Linear(d, d, options);
    this.q_proj = new nn.Linear(d, d, options);
    this.out_proj = new nn.Linear(d, d, options);
  }

  /** `mask`: a bool [batch or 1, 1, length, length] (true = attend), or undefined for causal attention alone. */
  forward(x: dt.Tensor, mask: dt.Tensor | undefined): dt.Tensor {
    // heads packed in the projections' last dim: one attention op, no views around it
    const attention = mask ? { attnMask: mask, heads: this.numHeads } : { isCausal: true, heads: this.numHeads };
    const out = dt.F.scaledDotProductAttention(this.q_proj.forward(x), this.k_proj.forward(x), this.v_proj.forward(x), attention);
    return this.out_proj.forward(out);
  }
}
