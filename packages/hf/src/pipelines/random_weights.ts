// Deterministic random weights for the built-in tiny pipelines, drawn the same way by
// tools/reference/make_pipeline_fixtures.py for diffusers' and transformers' modules (so a tiny
// pipeline's output can be compared with theirs without committing weights): the parameters in
// sorted key order, the k-th from randn with seed `seed + k` (DTorch's randn is
// torch.Generator().manual_seed's), in float32, scaled as below, then cast to the parameter's dtype.
//   2-D and larger: randn / sqrt(fan_in)  (fan_in: the product of all dims but the first)
//   1-D "...weight": 1 + 0.1 · randn      (norm scales near one)
//   1-D other:       0.1 · randn          (biases)
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';

/** Fills every parameter of `module` as the header says; buffers keep their values. */
export function fillRandomWeights(module: nn.Module, seed: number): void {
  const params = [...module.namedParameters()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  params.forEach(([key, p], k) => {
    const value = dt.tidy(() => {
      const draw = dt.randn(p.shape, { seed: seed + k, mesh: p.mesh, dtype: 'float32' });
      const scaled = p.shape.length >= 2 ? draw.mul(1 / Math.sqrt(p.shape.slice(1).reduce((a, b) => a * b, 1))) : key.endsWith('weight') ? draw.mul(0.1).add(1) : draw.mul(0.1);
      return scaled.to(p.dtype).redistribute(p.placements);
    });
    module.setTensor(key, value);
  });
}
