// T5Block (encoder): layer.0 is self-attention, layer.1 the feed-forward, each a pre-norm
// residual. Under float16 every sub-layer's output is clamped just inside the dtype's range
// (further inside when it overflowed), as transformers does to keep infinities out.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { T5Config } from './t5_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { T5Attention } from './t5_attention.js';
import { T5LayerFF } from './t5_feed_forward.js';
import { T5LayerNorm } from './t5_layer_norm.js';

/** transformers' T5LayerSelfAttention: x + SelfAttention(layer_norm(x)); a block's layer.0. */
export class T5LayerSelfAttention extends nn.Module {
  /** The self-attention, checkpoint keys layer.0.SelfAttention.*. */
  SelfAttention: T5Attention;
  /** The pre-norm, checkpoint key layer.0.layer_norm.weight. */
  layer_norm: T5LayerNorm;

  constructor(config: T5Config, hasRelativeAttentionBias: boolean, options: ModelOptions) {
    super();
    this.SelfAttention = new T5Attention(config, hasRelativeAttentionBias, options);
    this.layer_norm = new T5LayerNorm(config.dModel, config.layerNormEpsilon, options);
  }

  /** `x` [batch, length, dModel] with the attention's output added; `positionBias` is the additive mask of T5Attention.positionBias. */
  forward(x: dt.Tensor, positionBias: dt.Tensor): dt.Tensor {
    return x.add(this.SelfAttention.forward(this.layer_norm.forward(x), positionBias));
  }
}

// float16: clamp to max - 1000 when anything overflowed to infinity, else to max
function clampFloat16(x: dt.Tensor): dt.Tensor {
  if (x.dtype !== 'float16') return x;
  const limit = x.isinf().any().to('float32').mul(-1000).add(65504);
  return x.maximum(limit.neg()).minimum(limit);
}

/** transformers' T5Block (encoder): self-attention then feed-forward, each a pre-norm residual; checkpoint keys encoder.block.N.*. */
export class T5Block extends nn.Module {
  /** transformers' `layer`: layer.0 the T5LayerSelfAttention, layer.1 the T5LayerFF. */
  layer: nn.ModuleList<T5LayerSelfAttention | T5LayerFF>;

  constructor(config: T5Config, hasRelativeAttentionBias: boolean, options: ModelOptions) {
    super();
    this.layer = new nn.ModuleList<T5LayerSelfAttention | T5LayerFF>([
      new T5LayerSelfAttention(config, hasRelativeAttentionBias, options),
      new T5LayerFF(config, options),
    ]);
  }

  /** layer.0, typed. */
  get selfAttention(): T5LayerSelfAttention {
    return this.layer.at(0) as T5LayerSelfAttention;
  }

  /** The block's output [batch, length, dModel] for `x`; under float16 each sub-layer's output is clamped as transformers does. */
  forward(x: dt.Tensor, positionBias: dt.Tensor): dt.Tensor {
    const attended = clampFloat16(this.selfAttention.forward(x, positionBias));
    return clampFloat16((this.layer.at(1) as T5LayerFF).forward(attended));
  }
}
