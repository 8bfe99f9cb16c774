// DiagonalGaussianDistribution: the encoder's output as diffusers reads it: mean and logvar the
// two halves of the channels, logvar clamped to [-30, 20], std = exp(logvar / 2).
import * as dt from '@dtorch/api';
import { checkInteger } from '@dtorch/common';

/** A plain object, so tidy() keeps its tensors and dt.dispose() frees them. */
export interface DiagonalGaussianDistribution {
  /** [batch, latent_channels, h, w]. */
  mean: dt.Tensor;
  /** Clamped to [-30, 20]. */
  logvar: dt.Tensor;
  /** exp(logvar / 2). */
  std: dt.Tensor;
  /**
   * mean + std × noise, the noise dt.randn from `seed` (torch.randn with a generator seeded alike
   * gives the same noise), or the next draw of a dt.Generator (diffusers' sample(generator)).
   */
  sample(seed?: number | dt.Generator): dt.Tensor;
  /** The mean itself (not a copy), as diffusers' mode(). */
  mode(): dt.Tensor;
}

/** The distribution whose parameters `moments` [batch, 2 × latent_channels, h, w] gives. */
export function diagonalGaussian(moments: dt.Tensor): DiagonalGaussianDistribution {
  const [mean, raw] = moments.chunk(2, 1) as [dt.Tensor, dt.Tensor];
  const logvar = raw.clamp(-30, 20);
  raw.dispose();
  const std = logvar.mul(0.5).exp();
  return {
    mean,
    logvar,
    std,
    sample(seed?: number | dt.Generator): dt.Tensor {
      if (seed !== undefined && !(seed instanceof dt.Generator)) checkInteger('DiagonalGaussianDistribution.sample seed', seed, 0);
      const from = seed === undefined ? {} : seed instanceof dt.Generator ? { generator: seed } : { seed };
      return dt.tidy(() => {
        const noise = dt.randn(mean.shape, { dtype: mean.dtype, mesh: mean.mesh, placements: mean.placements, ...from });
        return mean.add(std.mul(noise));
      });
    },
    mode: () => mean,
  };
}
