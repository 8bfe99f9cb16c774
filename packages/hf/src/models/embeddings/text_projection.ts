// diffusers' PixArtAlphaTextProjection: linear_1, an activation (default tanh-GELU), linear_2;
// Flux and SD3 project the pooled CLIP embedding with it (act "silu").
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation, type Activation } from '../activations.js';

// diffusers' names for this layer's activations, as ours
const actNames: Record<string, string> = { gelu_tanh: 'gelu_pytorch_tanh', silu: 'silu', silu_fp32: 'silu' };

/** diffusers' PixArtAlphaTextProjection: linear_2(act(linear_1(x))). */
export class PixArtAlphaTextProjection extends nn.Module {
  /** The activation (act_fn: "gelu_tanh", the default, "silu" or "silu_fp32"). */
  readonly act: Activation;
  /** silu_fp32: the activation computed in float32. */
  readonly actInFloat32: boolean;
  /** inFeatures to hiddenSize. */
  linear_1: nn.Linear;
  /** hiddenSize to outFeatures (default hiddenSize). */
  linear_2: nn.Linear;

  constructor(inFeatures: number, hiddenSize: number, options: ModelOptions & { outFeatures?: number; actFn?: 'gelu_tanh' | 'silu' | 'silu_fp32' } = {}) {
    super();
    const { outFeatures, actFn = 'gelu_tanh', ...layer } = options;
    this.act = activation(actNames[actFn] ?? actFn, 'PixArtAlphaTextProjection');
    this.actInFloat32 = actFn === 'silu_fp32';
    this.linear_1 = new nn.Linear(inFeatures, hiddenSize, layer);
    this.linear_2 = new nn.Linear(hiddenSize, outFeatures ?? hiddenSize, layer);
  }

  /** [..., inFeatures] to [..., outFeatures]. */
  forward(caption: dt.Tensor): dt.Tensor {
    const h = this.linear_1.forward(caption);
    const a = this.actInFloat32 && h.dtype !== 'float32' ? this.act(h.to('float32')).to(h.dtype) : this.act(h);
    return this.linear_2.forward(a);
  }
}
