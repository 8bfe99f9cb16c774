// T5LayerNorm: RMS normalisation with a weight and no bias or mean, computed in float32; the
// result is cast to the weight's dtype before the weight multiplies it (as transformers does,
// and as LibTorch's rms_norm does when input and weight share a dtype).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** transformers' T5LayerNorm: an RMS norm with a weight only, computed in float32 and cast to the weight's dtype. */
export class T5LayerNorm extends nn.RMSNorm {
  constructor(hiddenSize: number, eps: number, options: ModelOptions) {
    super(hiddenSize, { ...options, eps });
  }

  /** `x` normalised over its last dim, times the weight (in the weight's dtype). */
  override forward(x: dt.Tensor): dt.Tensor {
    const weight = this.weight!;
    if (x.dtype === weight.dtype) return super.forward(x);
    // the float32 residual stream under float16 (whose `wo` stays float32): normalised, cast, weighted
    return dt.tidy(() => dt.F.rmsNorm(x, this.normalizedShape, { eps: this.eps }).to(weight.dtype).mul(weight));
  }
}
