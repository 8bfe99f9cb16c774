// Adaptive layer norms as diffusers' (normalization.py): a conditioning vector, through SiLU and
// `linear`, gives the shift, scale (and gates) that modulate a parameter-free layer norm:
//   AdaLayerNormZero        6 chunks: shift, scale, gate (attention) and shift, scale, gate (MLP)
//   AdaLayerNormZeroSingle  3 chunks: shift, scale, gate
//   AdaLayerNormContinuous  2 chunks: scale, shift (in that order), the norm at the model's end
// x [B, S, D] and emb [B, C]; the chunks broadcast over the sequence. Flux and SD3 use them
// (SD3.5's 9-chunk SD35AdaLayerNormZeroX is in ../sd3/).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';

// Each in a tidy of its own, so the product is released right after the add that reads it: the
// controller fuses the two into one addcmul only when it sees the product die in the same
// segment (a block's own tidy would release it at the block's end, often segments later).

/**
 * x · (1 + scale) + shift, each of shift and scale [B, D] over every token of x [B, S, D]. The 1
 * is added after the unsqueeze, so the multiply reads the sum itself: after a layer norm the
 * controller folds the add into the same kernel too (layer_norm_modulate).
 */
export const modulate = (x: dt.Tensor, shift: dt.Tensor, scale: dt.Tensor): dt.Tensor => dt.tidy(() => x.mul(scale.unsqueeze(1).add(1)).add(shift.unsqueeze(1)));

/**
 * norm(x) · (1 + scale) + shift: the norm's output released with the product, so the layer norm
 * fuses into the same kernel as the multiply and the add (one pass over x on GPUs).
 */
export const modulatedNorm = (norm: nn.LayerNorm, x: dt.Tensor, shift: dt.Tensor, scale: dt.Tensor): dt.Tensor => dt.tidy(() => modulate(norm.forward(x), shift, scale));

/** x + gate · y, the gate [B, D] over every token: the gated residual of the adaLN-Zero blocks. */
export const gated = (x: dt.Tensor, gate: dt.Tensor, y: dt.Tensor): dt.Tensor => dt.tidy(() => x.add(gate.unsqueeze(1).mul(y)));

/**
 * What the adaLN-Zero norms share: `linear` from the conditioning (embeddingDim) to `chunks` ·
 * embeddingDim, and the parameter-free LayerNorm (eps 1e-6). SD35AdaLayerNormZeroX extends it too.
 */
export abstract class AdaLayerNormChunks extends nn.Module {
  /** embeddingDim to chunks x embeddingDim, after a SiLU. */
  linear: nn.Linear;
  /** LayerNorm without weight or bias, eps 1e-6. */
  norm: nn.LayerNorm;
  readonly #chunks: number;

  constructor(embeddingDim: number, chunks: number, options: ModelOptions & { bias?: boolean }) {
    super();
    this.#chunks = chunks;
    this.linear = new nn.Linear(embeddingDim, chunks * embeddingDim, options);
    this.norm = new nn.LayerNorm(embeddingDim, { mesh: options.mesh, dtype: options.dtype, elementwiseAffine: false, eps: 1e-6 });
  }

  /** linear(SiLU(emb)) cut into its chunks, each [B, embeddingDim]. */
  protected chunks(emb: dt.Tensor): dt.Tensor[] {
    return this.linear.forward(dt.F.silu(emb)).chunk(this.#chunks, 1);
  }
}

/** diffusers' AdaLayerNormZero (no class-label embedding): norm(x) modulated, and the four other chunks. */
export class AdaLayerNormZero extends AdaLayerNormChunks {
  constructor(embeddingDim: number, options: ModelOptions & { bias?: boolean } = {}) {
    super(embeddingDim, 6, options);
  }

  /** [norm(x) · (1 + scaleMsa) + shiftMsa, gateMsa, shiftMlp, scaleMlp, gateMlp]. */
  forward(x: dt.Tensor, emb: dt.Tensor): [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor] {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp] = this.chunks(emb) as [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor];
    return [modulatedNorm(this.norm, x, shiftMsa, scaleMsa), gateMsa, shiftMlp, scaleMlp, gateMlp];
  }
}

/** diffusers' AdaLayerNormZeroSingle: norm(x) modulated, and the gate. */
export class AdaLayerNormZeroSingle extends AdaLayerNormChunks {
  constructor(embeddingDim: number, options: ModelOptions & { bias?: boolean } = {}) {
    super(embeddingDim, 3, options);
  }

  /** [norm(x) · (1 + scale) + shift, gate]. */
  forward(x: dt.Tensor, emb: dt.Tensor): [dt.Tensor, dt.Tensor] {
    const [shift, scale, gate] = this.chunks(emb) as [dt.Tensor, dt.Tensor, dt.Tensor];
    return [modulatedNorm(this.norm, x, shift, scale), gate];
  }
}

/** The options of AdaLayerNormContinuous (diffusers' constructor arguments). */
export interface AdaLayerNormContinuousOptions extends ModelOptions {
  /** The norm's own weight (and bias); Flux and SD3 use false. */
  elementwiseAffine: boolean;
  /** The norm's epsilon (Flux and SD3: 1e-6). */
  eps: number;
  /** A bias on `linear` and (with elementwiseAffine) on the norm; default true. */
  bias?: boolean;
}

/** diffusers' AdaLayerNormContinuous with norm_type "layer_norm". */
export class AdaLayerNormContinuous extends nn.Module {
  /** conditioningEmbeddingDim to 2 x embeddingDim (scale, then shift), after a SiLU. */
  linear: nn.Linear;
  /** The layer norm over embeddingDim. */
  norm: nn.LayerNorm;

  constructor(embeddingDim: number, conditioningEmbeddingDim: number, options: AdaLayerNormContinuousOptions) {
    super();
    const { elementwiseAffine, eps, bias = true, mesh, dtype } = options;
    this.linear = new nn.Linear(conditioningEmbeddingDim, 2 * embeddingDim, { mesh, dtype, bias });
    this.norm = new nn.LayerNorm(embeddingDim, { mesh, dtype, elementwiseAffine, bias, eps });
  }

  /** norm(x) x (1 + scale) + shift for x [B, S, embeddingDim] and `conditioning` [B, conditioningEmbeddingDim]. */
  forward(x: dt.Tensor, conditioning: dt.Tensor): dt.Tensor {
    const emb = this.linear.forward(dt.F.silu(conditioning).to(x.dtype));
    const [scale, shift] = emb.chunk(2, 1) as [dt.Tensor, dt.Tensor];
    return modulatedNorm(this.norm, x, shift, scale);
  }
}
