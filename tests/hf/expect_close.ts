// How the model tests compare an output with the reference library's: the largest error
// relative to the largest reference value (float32 reads; 16-bit floats are widened exactly).
import { expect } from 'vitest';
import type * as dt from '@dtorch/api';

/** max |got - want| / max |want|; the shapes must agree (`what` names the case). */
export async function relativeError(got: dt.Tensor, want: dt.Tensor, what?: string): Promise<number> {
  expect(got.shape, what).toEqual(want.shape);
  const [g, w] = [(await got.data()) as Float32Array, (await want.data()) as Float32Array];
  let [worst, scale] = [0, 0];
  w.forEach((v, i) => {
    worst = Math.max(worst, Math.abs(v - g[i]!));
    scale = Math.max(scale, Math.abs(v));
  });
  return worst / scale;
}

/** Fails unless relativeError(got, want) is finite and at most `tolerance`; disposes `want` (DTORCH_PRINT_ERRORS=1 prints the error). */
export async function expectClose(got: dt.Tensor, want: dt.Tensor, tolerance: number, what: string): Promise<void> {
  const error = await relativeError(got, want, what);
  want.dispose();
  expect(Number.isFinite(error), `${what}: finite`).toBe(true);
  if (process.env.DTORCH_PRINT_ERRORS) console.log(`${what}: ${error.toExponential(2)}`);
  expect(error, `${what}: largest error relative to the largest value`).toBeLessThanOrEqual(tolerance);
}
