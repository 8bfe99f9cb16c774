// diffusers' SD35AdaLayerNormZeroX (normalization.py), used only by SD3.5's dual-attention
// blocks: as AdaLayerNormZero (../normalization/ada_layer_norm.ts) but with 9 chunks, the
// normalised input modulated twice, for the joint attention and for the second, image-only
// attention (attn2), with its own gate. Keys: `<name>.linear`.
import type * as dt from '@dtorch/api';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { AdaLayerNormChunks, modulate } from '../normalization/ada_layer_norm.js';

/** diffusers' SD35AdaLayerNormZeroX: AdaLayerNormZero with 9 chunks, the input modulated for attn and for attn2 (SD3.5's dual-attention blocks). */
export class SD35AdaLayerNormZeroX extends AdaLayerNormChunks {
  constructor(embeddingDim: number, options: ModelOptions = {}) {
    super(embeddingDim, 9, options);
  }

  /** As diffusers: [norm(x) modulated, gateMsa, shiftMlp, scaleMlp, gateMlp, norm(x) modulated for attn2, gateMsa2]. */
  forward(x: dt.Tensor, emb: dt.Tensor, projected?: dt.Tensor): [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor] {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp, shiftMsa2, scaleMsa2, gateMsa2] = this.chunks(emb, projected) as [
      dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor,
    ];
    const normed = this.norm.forward(x);
    return [modulate(normed, shiftMsa, scaleMsa), gateMsa, shiftMlp, scaleMlp, gateMlp, modulate(normed, shiftMsa2, scaleMsa2), gateMsa2];
  }
}
