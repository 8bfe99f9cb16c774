// Random weights for the full-size benchmark models, made on each parameter's own device (no
// host-side draws of billions of values, no download): values from a hash of each element's
// index. Two scales, as the anchors' own inits give them:
//   fillLikeTorchInit         diffusers' models (PyTorch's default init of Linear and Conv2d:
//                             U(-1/sqrt(fan_in), 1/sqrt(fan_in))), norm weights near 1 and biases
//                             near 0, buffers (SD3's position table) in [-1, 1)
//   fillLikeTransformersInit  transformers' text encoders (std about 0.02), norm weights near 1
import * as dt from '@dtorch/api';

/**
 * Values in [-0.5, 0.5) from each element's index, made on `mesh`. The index is split in two
 * (rows x a run of trailing dims of at most 16,384 elements) so both parts stay exact in float32
 * however large the tensor.
 */
export function noise(shape, mesh, seed) {
  return dt.tidy(() => {
    const n = shape.reduce((a, b) => a * b, 1);
    let cols = shape.length ? shape[shape.length - 1] : 1;
    for (let d = shape.length - 2; d >= 0 && cols * shape[d] <= 16384; d--) cols *= shape[d];
    const rows = n / cols;
    const r = dt.arange(rows, undefined, 1, { mesh, dtype: 'float32' }).reshape([rows, 1]);
    const c = dt.arange(cols, undefined, 1, { mesh, dtype: 'float32' }).reshape([1, cols]);
    const h = r.mul(12.9898).add(c.mul(78.233)).add((seed % 1000) * 0.7071).sin().mul(43758.5453);
    return h.sub(h.floor()).sub(0.5).reshape(shape);
  });
}

export function fillLikeTorchInit(model) {
  const params = [...model.namedParameters()];
  const shapes = new Map(params.map(([k, p]) => [k, p.shape]));
  let seed = 0;
  for (const [key, t] of [...params, ...model.namedBuffers()]) {
    const weight = shapes.get(key.replace(/bias$/, 'weight'));
    const fanIn = weight && weight.length >= 2 ? weight.slice(1).reduce((a, b) => a * b, 1) : 0;
    const isParam = shapes.has(key);
    const [scale, offset] = !isParam ? [2, 0] : fanIn ? [2 / Math.sqrt(fanIn), 0] : key.endsWith('weight') ? [0.1, 1] : [0.1, 0];
    const value = dt.tidy(() => noise(t.shape, t.mesh, ++seed).mul(scale).add(offset).to(t.dtype));
    model.setTensor(key, value);
  }
}

export function fillLikeTransformersInit(model) {
  let seed = 0;
  for (const [key, p] of model.namedParameters()) {
    const isNorm = /norm/.test(key) && key.endsWith('weight');
    const value = dt.tidy(() => noise(p.shape, p.mesh, ++seed).mul(isNorm ? 0.1 : 0.07).add(isNorm ? 1 : 0).to(p.dtype));
    model.setTensor(key, value);
  }
}
