// CLIP's transformer encoder: layers of pre-norm attention and MLP residuals.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { CLIPTextConfig } from './clip_text_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';
import { CLIPAttention } from './clip_attention.js';

/** transformers' CLIPMLP: fc2(act(fc1(x))); a layer's mlp. */
export class CLIPMLP extends nn.Module {
  /** The activation of the config's hidden_act. */
  readonly act: Activation;
  /** hiddenSize to intermediateSize. */
  fc1: nn.Linear;
  /** intermediateSize to hiddenSize. */
  fc2: nn.Linear;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.act = activation(config.hiddenAct, config.file);
    this.fc1 = new nn.Linear(config.hiddenSize, config.intermediateSize, options);
    this.fc2 = new nn.Linear(config.intermediateSize, config.hiddenSize, options);
  }

  /** [..., hiddenSize] to [..., hiddenSize]. */
  forward(x: dt.Tensor): dt.Tensor {
    return this.fc2.forward(this.act(this.fc1.forward(x)));
  }
}

/** transformers' CLIPEncoderLayer: pre-norm attention and MLP residuals; checkpoint keys encoder.layers.N.*. */
export class CLIPEncoderLayer extends nn.Module {
  /** The self-attention (causal, padding masked). */
  self_attn: CLIPAttention;
  /** The norm before self_attn. */
  layer_norm1: nn.LayerNorm;
  /** fc1, the activation, fc2. */
  mlp: CLIPMLP;
  /** The norm before mlp. */
  layer_norm2: nn.LayerNorm;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    const norm = { ...options, eps: config.layerNormEps };
    this.self_attn = new CLIPAttention(config, options);
    this.layer_norm1 = new nn.LayerNorm(config.hiddenSize, norm);
    this.mlp = new CLIPMLP(config, options);
    this.layer_norm2 = new nn.LayerNorm(config.hiddenSize, norm);
  }

  /** The layer's output [batch, length, hiddenSize]; `mask` as CLIPAttention.forward takes it. */
  forward(x: dt.Tensor, mask: dt.Tensor | undefined): dt.Tensor {
    const attended = x.add(this.self_attn.forward(this.layer_norm1.forward(x), mask));
    return attended.add(this.mlp.forward(this.layer_norm2.forward(attended)));
  }
}

/** transformers' CLIPEncoder: the stack of layers, checkpoint keys text_model.encoder.*. */
export class CLIPEncoder extends nn.Module {
  /** numHiddenLayers CLIPEncoderLayers, checkpoint keys encoder.layers.N.*. */
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
