// The adaptive layer norms of SD3's blocks (diffusers' normalization.py): a linear of
// SiLU(conditioning) gives shifts, scales and gates; the norm itself has no parameters
// (LayerNorm, eps 1e-6). Keys: `<name>.linear`.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';

type Layout = Required<ModelOptions>;

const modulate = (x: dt.Tensor, shift: dt.Tensor, scale: dt.Tensor) => x.mul(scale.unsqueeze(1).add(1)).add(shift.unsqueeze(1));

/** The modulations a block applies after its attention and around its feed-forward. */
export interface Modulation {
  /** Scales the attention output. */
  gateMsa: dt.Tensor;
  shiftMlp: dt.Tensor;
  scaleMlp: dt.Tensor;
  gateMlp: dt.Tensor;
}

abstract class AdaptiveNorm extends nn.Module {
  linear: nn.Linear;
  readonly norm: nn.LayerNorm;

  constructor(dim: number, conditioningDim: number, chunks: number, options: Layout) {
    super();
    this.linear = new nn.Linear(conditioningDim, chunks * dim, options);
    this.norm = new nn.LayerNorm(dim, { ...options, eps: 1e-6, elementwiseAffine: false });
  }

  protected chunks(emb: dt.Tensor, n: number): dt.Tensor[] {
    return this.linear.forward(dt.F.silu(emb)).chunk(n, 1);
  }
}

/** AdaLayerNormZero: 6 chunks; the normalised input shifted and scaled for the attention. */
export class AdaLayerNormZero extends AdaptiveNorm {
  constructor(dim: number, options: Layout) {
    super(dim, dim, 6, options);
  }

  forward(x: dt.Tensor, emb: dt.Tensor): { x: dt.Tensor } & Modulation {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp] = this.chunks(emb, 6) as [dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor];
    return { x: modulate(this.norm.forward(x), shiftMsa, scaleMsa), gateMsa, shiftMlp, scaleMlp, gateMlp };
  }
}

/** SD35AdaLayerNormZeroX: 9 chunks; also the input of the second (image-only) attention and its gate. */
export class SD35AdaLayerNormZeroX extends AdaptiveNorm {
  constructor(dim: number, options: Layout) {
    super(dim, dim, 9, options);
  }

  forward(x: dt.Tensor, emb: dt.Tensor): { x: dt.Tensor; x2: dt.Tensor; gateMsa2: dt.Tensor } & Modulation {
    const [shiftMsa, scaleMsa, gateMsa, shiftMlp, scaleMlp, gateMlp, shiftMsa2, scaleMsa2, gateMsa2] = this.chunks(emb, 9) as dt.Tensor[] as [
      dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor, dt.Tensor,
    ];
    const normed = this.norm.forward(x);
    return { x: modulate(normed, shiftMsa, scaleMsa), x2: modulate(normed, shiftMsa2, scaleMsa2), gateMsa, shiftMlp, scaleMlp, gateMlp, gateMsa2 };
  }
}

/** AdaLayerNormContinuous (layer_norm, no affine): 2 chunks, scale then shift. */
export class AdaLayerNormContinuous extends AdaptiveNorm {
  constructor(dim: number, conditioningDim: number, options: Layout) {
    super(dim, conditioningDim, 2, options);
  }

  forward(x: dt.Tensor, emb: dt.Tensor): dt.Tensor {
    const [scale, shift] = this.linear.forward(dt.F.silu(emb).to(x.dtype)).chunk(2, 1) as [dt.Tensor, dt.Tensor];
    return modulate(this.norm.forward(x), shift, scale);
  }
}

/** x · (1 + scale) + shift, each [B, dim] over every token of x [B, N, dim]. */
export { modulate };
