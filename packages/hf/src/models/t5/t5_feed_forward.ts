// T5's feed-forward layer: a pre-norm residual around either wi -> activation -> wo (T5 v1.0)
// or the gated form act(wi_0 x) * wi_1 x -> wo (v1.1). Under float16 `wo` keeps float32
// weights (transformers' _keep_in_fp32_modules) and its input is cast up to them, so the
// residual stream after it is float32, as in transformers.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { T5Config } from './t5_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';
import { T5LayerNorm } from './t5_layer_norm.js';

const woOptions = (options: ModelOptions) => ({ ...options, bias: false, dtype: options.dtype === 'float16' ? ('float32' as const) : options.dtype });

function project(wo: nn.Linear, h: dt.Tensor): dt.Tensor {
  const dtype = nn.linearDtype(wo); // an FP8 wo computes in the float dtype it was quantized from
  return wo.forward(h.dtype === dtype ? h : h.to(dtype));
}

/** transformers' T5DenseActDense (T5 v1.0): wo(act(wi(x))), no biases. */
export class T5DenseActDense extends nn.Module {
  /** The activation of the config's dense_act_fn. */
  readonly act: Activation;
  /** dModel to dFf. */
  wi: nn.Linear;
  /** dFf to dModel; float32 weights when the model is float16 (transformers' _keep_in_fp32_modules). */
  wo: nn.Linear;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.act = activation(config.denseActFn, config.file);
    this.wi = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wo = new nn.Linear(config.dFf, config.dModel, woOptions(options));
  }

  /** [..., dModel] to [..., dModel] (float32 when `wo` is). */
  forward(x: dt.Tensor): dt.Tensor {
    return project(this.wo, this.act(this.wi.forward(x)));
  }
}

/** transformers' T5DenseGatedActDense (T5 v1.1, "gated-" feed_forward_proj): wo(act(wi_0(x)) * wi_1(x)), no biases. */
export class T5DenseGatedActDense extends nn.Module {
  /** The activation of the config's dense_act_fn, applied to wi_0's output. */
  readonly act: Activation;
  /** dModel to dFf, through the activation: the gate. */
  wi_0: nn.Linear;
  /** dModel to dFf, linear. */
  wi_1: nn.Linear;
  /** dFf to dModel; float32 weights when the model is float16 (transformers' _keep_in_fp32_modules). */
  wo: nn.Linear;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.act = activation(config.denseActFn, config.file);
    this.wi_0 = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wi_1 = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wo = new nn.Linear(config.dFf, config.dModel, woOptions(options));
  }

  /** [..., dModel] to [..., dModel] (float32 when `wo` is). */
  forward(x: dt.Tensor): dt.Tensor {
    return project(this.wo, this.act(this.wi_0.forward(x)).mul(this.wi_1.forward(x)));
  }
}

/** transformers' T5LayerFF: x + DenseReluDense(layer_norm(x)); a block's layer.1. */
export class T5LayerFF extends nn.Module {
  /** The feed-forward (gated when the config's isGatedAct), checkpoint keys layer.1.DenseReluDense.*. */
  DenseReluDense: T5DenseActDense | T5DenseGatedActDense;
  /** The pre-norm, checkpoint key layer.1.layer_norm.weight. */
  layer_norm: T5LayerNorm;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.DenseReluDense = config.isGatedAct ? new T5DenseGatedActDense(config, options) : new T5DenseActDense(config, options);
    this.layer_norm = new T5LayerNorm(config.dModel, config.layerNormEpsilon, options);
  }

  /** `x` [batch, length, dModel] with the feed-forward's output added. */
  forward(x: dt.Tensor): dt.Tensor {
    return x.add(this.DenseReluDense.forward(this.layer_norm.forward(x)));
  }
}
