// What the kernel tests compare against (tests/engine/fusion.test.ts, conv_channels_last.test.ts):
// the relative L2 error, and the float64 reference of DTorch's group norm kernels.

/** ‖a - b‖ / ‖b‖. */
export const relativeL2 = (a: Float32Array, b: Float32Array): number =>
  Math.sqrt(a.reduce((sum, v, i) => sum + (v - b[i]!) ** 2, 0) / b.reduce((sum, v) => sum + v * v, 0));

// group_norm of x [n, c, spatial] (flattened values) in float64, each channel scaled and shifted
// by w and b where given, then through SiLU with `silu`: the reference of the GPU kernel's result.
export function groupNormReference(xs: Float32Array, [n, c, spatial]: [number, number, number], groups: number, eps: number, w?: Float32Array, b?: Float32Array, silu = false): Float32Array {
  const out = new Float32Array(xs.length);
  const perRow = (c / groups) * spatial;
  for (let r = 0; r < n * groups; r++) {
    const [start, end] = [r * perRow, (r + 1) * perRow];
    let [sum, squares] = [0, 0];
    for (let i = start; i < end; i++) sum += xs[i]!;
    const mean = sum / perRow;
    for (let i = start; i < end; i++) squares += (xs[i]! - mean) ** 2;
    const rstd = 1 / Math.sqrt(squares / perRow + eps);
    for (let i = start; i < end; i++) {
      const ch = Math.floor(i / spatial) % c;
      const y = (xs[i]! - mean) * rstd * (w ? w[ch]! : 1) + (b ? b[ch]! : 0);
      out[i] = silu ? y / (1 + Math.exp(-y)) : y;
    }
  }
  return out;
}
