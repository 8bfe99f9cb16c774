// diffusers' SD35AdaLayerNormZeroX (normalization.py), used only by SD3.5's dual-attention
// blocks: as AdaLayerNormZero (../normalization/ada_layer_norm.ts) but with 9 chunks, the
// normalised input modulated twice, for the joint attention and for the second, image-only
// attention (attn2), with its own gate. Keys: `<name>.linear`.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { modulate } from '../normalization/ada_layer_norm.js';

export class SD35AdaLayerNormZeroX extends nn.Module {
  linear: nn.Linear;
  norm: nn.LayerNorm;

  constructor(embeddingDim: number, options: ModelOptions = {}) {
    super();
    this.linear = new nn.Linear(embeddingDim, 9 * embeddingDim, options);
    this.norm = new nn.LayerNorm(embeddingDim, { mesh: options.mesh, dtype: options.dtype, elementwiseAffine: false, eps: 1e-6 });
  }

  /** As diffusers: [norm(x) modulated, gateMsa, shiftMlp, scaleMlp, gateMlp, norm(x) modulated for attn2, gateMsa2]. */
  forward(x: dt.Tensor, emb: dt.Tensor): [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor] {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp, shiftMsa2, scaleMsa2, gateMsa2] = this.linear.forward(dt.F.silu(emb)).chunk(9, 1) as [
      dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor,
    ];
    const normed = this.norm.forward(x);
    return [modulate(normed, shiftMsa, scaleMsa), gateMsa, shiftMlp, scaleMlp, gateMlp, modulate(normed, shiftMsa2, scaleMsa2), gateMsa2];
  }
}
