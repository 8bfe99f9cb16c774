// T5Block (encoder): layer.0 is self-attention, layer.1 the feed-forward, each a pre-norm
// residual. Under float16 every sub-layer's output is clamped just inside the dtype's range
// (further inside when it overflowed), as transformers does to keep infinities out.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { T5Config } from '../../configs/t5_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { T5Attention } from './t5_attention.js';
import { T5LayerFF } from './t5_feed_forward.js';
import { T5LayerNorm } from './t5_layer_norm.js';

export class T5LayerSelfAttention extends nn.Module {
  SelfAttention: T5Attention;
  layer_norm: T5LayerNorm;

  constructor(config: T5Config, hasRelativeAttentionBias: boolean, options: ModelOptions) {
    super();
    this.SelfAttention = new T5Attention(config, hasRelativeAttentionBias, options);
    this.layer_norm = new T5LayerNorm(config.dModel, config.layerNormEpsilon, options);
  }

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

export class T5Block extends nn.Module {
  layer: nn.ModuleList<T5LayerSelfAttention | T5LayerFF>;

  constructor(config: T5Config, hasRelativeAttentionBias: boolean, options: ModelOptions) {
    super();
    this.layer = new nn.ModuleList<T5LayerSelfAttention | T5LayerFF>([
      new T5LayerSelfAttention(config, hasRelativeAttentionBias, options),
      new T5LayerFF(config, options),
    ]);
  }

  get selfAttention(): T5LayerSelfAttention {
    return this.layer.at(0) as T5LayerSelfAttention;
  }

  forward(x: dt.Tensor, positionBias: dt.Tensor): dt.Tensor {
    const attended = clampFloat16(this.selfAttention.forward(x, positionBias));
    return clampFloat16((this.layer.at(1) as T5LayerFF).forward(attended));
  }
}
