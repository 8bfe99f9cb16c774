// CLIP's transformer encoder: layers of pre-norm attention and MLP residuals.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { CLIPTextConfig } from '../../configs/clip_text_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';
import { CLIPAttention } from './clip_attention.js';

export class CLIPMLP extends nn.Module {
  readonly act: Activation;
  fc1: nn.Linear;
  fc2: nn.Linear;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.act = activation(config.hiddenAct, config.file);
    this.fc1 = new nn.Linear(config.hiddenSize, config.intermediateSize, options);
    this.fc2 = new nn.Linear(config.intermediateSize, config.hiddenSize, options);
  }

  forward(x: dt.Tensor): dt.Tensor {
    return this.fc2.forward(this.act(this.fc1.forward(x)));
  }
}

export class CLIPEncoderLayer extends nn.Module {
  self_attn: CLIPAttention;
  layer_norm1: nn.LayerNorm;
  mlp: CLIPMLP;
  layer_norm2: nn.LayerNorm;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    const norm = { ...options, eps: config.layerNormEps };
    this.self_attn = new CLIPAttention(config, options);
    this.layer_norm1 = new nn.LayerNorm(config.hiddenSize, norm);
    this.mlp = new CLIPMLP(config, options);
    this.layer_norm2 = new nn.LayerNorm(config.hiddenSize, norm);
  }

  forward(x: dt.Tensor, mask: dt.Tensor | undefined): dt.Tensor {
    const attended = x.add(this.self_attn.forward(this.layer_norm1.forward(x), mask));
    return attended.add(this.mlp.forward(this.layer_norm2.forward(attended)));
  }
}

export class CLIPEncoder extends nn.Module {
  layers: nn.ModuleList<CLIPEncoderLayer>;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.layers = new nn.ModuleList(Array.from({ length: config.numHiddenLayers }, () => new CLIPEncoderLayer(config, options)));
  }

  /** Every layer's output in order when `keepEvery`, else the last one alone (the input is never among them). */
  forward(x: dt.Tensor, mask: dt.Tensor | undefined, keepEvery: boolean): dt.Tensor[] {
    const outputs: dt.Tensor[] = [];
    for (const layer of this.layers) {
      const out = layer.call(outputs.at(-1) ?? x, mask); // each layer's intermediates freed at its end
      if (!keepEvery) outputs.pop()?.dispose();
      outputs.push(out);
    }
    return outputs;
  }
}
