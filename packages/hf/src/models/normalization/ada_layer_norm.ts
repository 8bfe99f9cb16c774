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
import { PackedProjections } from '../attention/packed_projections.js';

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

  /** linear(SiLU(emb)) cut into its chunks, each [B, embeddingDim]; `projected`: that linear's output, computed already (AdaLNProjections). */
  protected chunks(emb: dt.Tensor, projected?: dt.Tensor): dt.Tensor[] {
    return (projected ?? this.linear.forward(dt.F.silu(emb))).chunk(this.#chunks, 1);
  }
}

/** diffusers' AdaLayerNormZero (no class-label embedding): norm(x) modulated, and the four other chunks. */
export class AdaLayerNormZero extends AdaLayerNormChunks {
  constructor(embeddingDim: number, options: ModelOptions & { bias?: boolean } = {}) {
    super(embeddingDim, 6, options);
  }

  /** [norm(x) · (1 + scaleMsa) + shiftMsa, gateMsa, shiftMlp, scaleMlp, gateMlp]. */
  forward(x: dt.Tensor, emb: dt.Tensor, projected?: dt.Tensor): [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor] {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp] = this.chunks(emb, projected) as [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor];
    return [modulatedNorm(this.norm, x, shiftMsa, scaleMsa), gateMsa, shiftMlp, scaleMlp, gateMlp];
  }
}

/** diffusers' AdaLayerNormZeroSingle: norm(x) modulated, and the gate. */
export class AdaLayerNormZeroSingle extends AdaLayerNormChunks {
  constructor(embeddingDim: number, options: ModelOptions & { bias?: boolean } = {}) {
    super(embeddingDim, 3, options);
  }

  /** [norm(x) · (1 + scale) + shift, gate]. */
  forward(x: dt.Tensor, emb: dt.Tensor, projected?: dt.Tensor): [dt.Tensor, dt.Tensor] {
    const [shift, scale, gate] = this.chunks(emb, projected) as [dt.Tensor, dt.Tensor, dt.Tensor];
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

  /**
   * norm(x) x (1 + scale) + shift for x [B, S, embeddingDim] and `conditioning` [B, conditioningEmbeddingDim];
   * `projected`: linear(SiLU(conditioning)), computed already (AdaLNProjections).
   */
  forward(x: dt.Tensor, conditioning: dt.Tensor, projected?: dt.Tensor): dt.Tensor {
    const emb = projected ?? this.linear.forward(dt.F.silu(conditioning).to(x.dtype));
    const [scale, shift] = emb.chunk(2, 1) as [dt.Tensor, dt.Tensor];
    return modulatedNorm(this.norm, x, shift, scale);
  }
}

/** An adaLN norm: its `linear` reads SiLU of the conditioning vector. */
type AdaLNNorm = AdaLayerNormChunks | AdaLayerNormContinuous;

/**
 * A model's adaLN norms, whose linears all read SiLU(temb), projected at once: SiLU once, and once
 * packed (pack(), PreTrainedModel.packProjections) one matmul for every block's modulation, where
 * each norm ran a SiLU and a matmul of its own (SD3-medium: 48 of each per step, each reading
 * its weights at a fraction of the memory's speed: [2, 1536] rows).
 */
export class AdaLNProjections {
  readonly #norms: () => readonly AdaLNNorm[];
  readonly #packs: PackedProjections;

  /** `norms`: the model's norms now (a submodule replaced later is seen). */
  constructor(norms: () => readonly AdaLNNorm[]) {
    this.#norms = norms;
    this.#packs = new PackedProjections(() => norms().map((n) => n.linear));
  }

  /** Packs the norms' linears into one buffer (PackedProjections.pack). */
  pack(): boolean {
    return this.#packs.pack();
  }

  /**
   * Each norm's linear(SiLU(temb)), for its forward's `projected`; undefined while unpacked or
   * when temb's dtype is not the linears' (each norm then computes its own).
   */
  project(temb: dt.Tensor): Map<nn.Module, dt.Tensor> | undefined {
    const norms = this.#norms();
    if (!this.#packs.packed || norms[0]?.linear.weight.dtype !== temb.dtype) return undefined;
    const projected = this.#packs.forward(dt.F.silu(temb));
    return new Map(norms.map((n, i) => [n, projected[i]!]));
  }
}
