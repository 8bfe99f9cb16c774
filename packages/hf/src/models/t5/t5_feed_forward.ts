// T5's feed-forward layer: a pre-norm residual around either wi -> activation -> wo (T5 v1.0)
// or the gated form act(wi_0 x) * wi_1 x -> wo (v1.1). Under float16 `wo` keeps float32
// weights (transformers' _keep_in_fp32_modules) and its input is cast up to them, so the
// residual stream after it is float32, as in transformers.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { T5Config } from '../../configs/t5_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';
import { T5LayerNorm } from './t5_layer_norm.js';

const woOptions = (options: ModelOptions) => ({ ...options, bias: false, dtype: options.dtype === 'float16' ? ('float32' as const) : options.dtype });

function project(wo: nn.Linear, h: dt.Tensor): dt.Tensor {
  return wo.forward(h.dtype === wo.weight.dtype ? h : h.to(wo.weight.dtype));
}

export class T5DenseActDense extends nn.Module {
  readonly act: Activation;
  wi: nn.Linear;
  wo: nn.Linear;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.act = activation(config.denseActFn, config.file);
    this.wi = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wo = new nn.Linear(config.dFf, config.dModel, woOptions(options));
  }

  forward(x: dt.Tensor): dt.Tensor {
    return project(this.wo, this.act(this.wi.forward(x)));
  }
}

export class T5DenseGatedActDense extends nn.Module {
  readonly act: Activation;
  wi_0: nn.Linear;
  wi_1: nn.Linear;
  wo: nn.Linear;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.act = activation(config.denseActFn, config.file);
    this.wi_0 = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wi_1 = new nn.Linear(config.dModel, config.dFf, { ...options, bias: false });
    this.wo = new nn.Linear(config.dFf, config.dModel, woOptions(options));
  }

  forward(x: dt.Tensor): dt.Tensor {
    return project(this.wo, this.act(this.wi_0.forward(x)).mul(this.wi_1.forward(x)));
  }
}

export class T5LayerFF extends nn.Module {
  DenseReluDense: T5DenseActDense | T5DenseGatedActDense;
  layer_norm: T5LayerNorm;

  constructor(config: T5Config, options: ModelOptions) {
    super();
    this.DenseReluDense = config.isGatedAct ? new T5DenseGatedActDense(config, options) : new T5DenseActDense(config, options);
    this.layer_norm = new T5LayerNorm(config.dModel, config.layerNormEpsilon, options);
  }

  forward(x: dt.Tensor): dt.Tensor {
    return x.add(this.DenseReluDense.forward(this.layer_norm.forward(x)));
  }
}
