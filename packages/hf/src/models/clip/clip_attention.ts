// CLIPAttention: q/k/v/out projections with biases, scaled dot-product attention over heads.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { CLIPTextConfig } from './clip_text_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { PackedProjections, type HasPackedProjections } from '../attention/packed_projections.js';

/** transformers' CLIPAttention: multi-head self-attention, projections with biases; a layer's self_attn. */
export class CLIPAttention extends nn.Module implements HasPackedProjections {
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
  // q, k and v in one matmul once packed (PreTrainedModel.packProjections)
  readonly #qkv = new PackedProjections(() => [this.q_proj, this.k_proj, this.v_proj]);

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
    const [q, k, v] = this.#qkv.forward(x) as [dt.Tensor, dt.Tensor, dt.Tensor];
    return this.out_proj.forward(dt.F.scaledDotProductAttention(q, k, v, attention));
  }

  /** Packs q_proj, k_proj and v_proj into one buffer, run as one matmul (PackedProjections). */
  packProjections(): number {
    return this.#qkv.pack() ? 1 : 0;
  }
}
