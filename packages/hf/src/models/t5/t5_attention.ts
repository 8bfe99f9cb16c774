// T5Attention (self-attention of the encoder): q, k, v and o projections without biases and
// without the 1/sqrt(d) scaling (T5 folds it into the weights); the relative position bias,
// computed by the first layer from its bucket embedding and shared by the others, is the
// additive attention mask, with masked keys at the dtype's lowest value.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { T5Config } from './t5_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { relativePositionBuckets } from './relative_position_bucket.js';

const lowest: Partial<Record<dt.DType, number>> = { float32: -3.4028234663852886e38, bfloat16: -3.3895313892515355e38, float16: -65504, float64: -Number.MAX_VALUE };

/** transformers' T5Attention (encoder self-attention): q, k, v, o without biases or 1/sqrt(d) scaling, a relative position bias as the mask. */
export class T5Attention extends nn.Module {
  /** The config's num_heads. */
  readonly nHeads: number;
  /** The config's d_kv: each head's width. */
  readonly keyValueProjDim: number;
  /** The config's relative_attention_num_buckets. */
  readonly numBuckets: number;
  /** The config's relative_attention_max_distance. */
  readonly maxDistance: number;
  /** dModel to numHeads * dKv. */
  q: nn.Linear;
  /** dModel to numHeads * dKv. */
  k: nn.Linear;
  /** dModel to numHeads * dKv. */
  v: nn.Linear;
  /** numHeads * dKv to dModel. */
  o: nn.Linear;
  /** The bias per bucket and head [numBuckets, numHeads]; only block 0 has it (undefined in the others). */
  relative_attention_bias: nn.Embedding | undefined;

  constructor(config: T5Config, hasRelativeAttentionBias: boolean, options: ModelOptions) {
    super();
    this.nHeads = config.numHeads;
    this.keyValueProjDim = config.dKv;
    this.numBuckets = config.relativeAttentionNumBuckets;
    this.maxDistance = config.relativeAttentionMaxDistance;
    const inner = config.numHeads * config.dKv;
    const o = { ...options, bias: false };
    this.q = new nn.Linear(config.dModel, inner, o);
    this.k = new nn.Linear(config.dModel, inner, o);
    this.v = new nn.Linear(config.dModel, inner, o);
    this.o = new nn.Linear(inner, config.dModel, o);
    this.relative_attention_bias = hasRelativeAttentionBias ? new nn.Embedding(this.numBuckets, this.nHeads, options) : undefined;
  }

  /**
   * The additive mask [1 or batch, heads, length, length] that every layer takes: the position bias,
   * and the dtype's lowest value at keys the attention mask ([batch, length], 1 = attend) hides.
   */
  positionBias(length: number, attentionMask: dt.Tensor | undefined): dt.Tensor {
    const table = this.relative_attention_bias!;
    return dt.tidy(() => {
      const buckets = relativePositionBuckets(length, length, { bidirectional: true, numBuckets: this.numBuckets, maxDistance: this.maxDistance, mesh: table.weight.mesh });
      const bias = table.forward(buckets).permute([2, 0, 1]).unsqueeze(0); // [1, heads, q, k]
      // laid out contiguously once for all layers: GPU attention kernels take an additive mask
      // only when its rows are contiguous, else the attention falls back to unfused math in float32
      if (!attentionMask) return bias.contiguous();
      const attend = attentionMask.ne(0).reshape([attentionMask.shape[0]!, 1, 1, length]);
      return dt.where(attend, bias, lowest[bias.dtype] ?? -Infinity).contiguous();
    });
  }

  /** Self-attention of `x` [batch, length, dModel] with `positionBias` (from positionBias) added to the scores. */
  forward(x: dt.Tensor, positionBias: dt.Tensor): dt.Tensor {
    // heads packed in the projections' last dim: one attention op, no views around it
    const out = dt.F.scaledDotProductAttention(this.q.forward(x), this.k.forward(x), this.v.forward(x), { attnMask: positionBias, scale: 1, heads: this.nHeads });
    return this.o.forward(out);
  }
}
