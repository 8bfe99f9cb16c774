// On GPUs a linear in 16-bit floats runs the cuBLASLt kernel timed fastest for its shape: the first
// call of a shape times the heuristic's best candidates on its own operands, later calls reuse the
// choice (native/external/cuda/tuned_matmul.cpp). Each epilogue (none, bias, bias + GELU) and each
// row stride (the first columns of a wider buffer: a LoRA join) is a shape of its own; the results
// equal float32 linears within a 16-bit rounding.
import './matmul_tuning_on.js';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

async function values(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.data()) as Float32Array);
  t.dispose();
  return v;
}

// the largest |got − expected| / (|expected| + 1): a 16-bit rounding of a sum of ~K terms is well under 1e-2
function worst(got: number[], expected: number[]): number {
  expect(got.length).toBe(expected.length);
  return got.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i]!) / (Math.abs(expected[i]!) + 1)), 0);
}

describe('timed matmuls (DTORCH_MATMUL_TUNING)', () => {
  it('leave the counters at zero for linears on CPU devices', async () => {
    expect(dt.nativeSettings().matmulTuning, 'DTORCH_MATMUL_TUNING=1 for this file (matmul_tuning_on.ts)').toBe(true);
    const before = dt.cuda.matmulTuningStats();
    expect(Object.keys(before).sort()).toEqual(['candidates', 'heuristicCalls', 'shapes', 'tunedCalls']);
    const cpu = new dt.DeviceMesh('cpu', [0]);
    const x = dt.tidy(() => dt.randn([4, 16], { seed: 1, mesh: cpu }).to('bfloat16'));
    const w = dt.tidy(() => dt.randn([8, 16], { seed: 2, mesh: cpu }).to('bfloat16'));
    await values(dt.F.linear(x, w));
    expect(dt.cuda.matmulTuningStats()).toEqual(before);
    dt.dispose([x, w]);
  });

  it.skipIf(onGpu)(`choose once per shape, epilogue and row stride, and equal float32 within a rounding${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    // Flux's LoRA-widened inner size (3072 + 16), scaled down in tokens and outputs
    const [m, k, n] = [300, 3088, 520];
    for (const dtype of ['bfloat16', 'float16'] as const) {
      const joined = dt.tidy(() => dt.randn([m, k + 64], { seed: 11, mesh: gpu }).mul(0.5).to(dtype));
      const x = dt.tidy(() => joined.narrow(-1, 0, k).contiguous());
      const w = dt.tidy(() => dt.randn([n, k], { seed: 12, mesh: gpu }).mul(1 / Math.sqrt(k)).to(dtype));
      const b = dt.tidy(() => dt.randn([n], { seed: 13, mesh: gpu }).to(dtype));
      const f32 = (t: dt.Tensor) => t.to('float32');
      const calls: [string, () => dt.Tensor, () => dt.Tensor][] = [
        ['plain', () => dt.F.linear(x, w), () => dt.F.linear(f32(x), f32(w))],
        ['bias', () => dt.F.linear(x, w, b), () => dt.F.linear(f32(x), f32(w), f32(b))],
        // the controller fuses the GELU after the product into the matmul's epilogue (linear_gelu)
        ['gelu', () => dt.F.gelu(dt.F.linear(x, w, b), { approximate: 'tanh' }), () => dt.F.gelu(dt.F.linear(f32(x), f32(w), f32(b)), { approximate: 'tanh' })],
        // rows k + 64 apart: read where they lie (another leading dimension, another choice)
        ['strided', () => dt.F.linear(joined.narrow(-1, 0, k), w, b), () => dt.F.linear(f32(x), f32(w), f32(b))],
      ];
      for (const [name, run, reference] of calls) {
        const before = dt.cuda.matmulTuningStats();
        const got = await values(dt.tidy(run));
        const first = dt.cuda.matmulTuningStats();
        expect(first.shapes - before.shapes, `${dtype} ${name}: a new shape is timed`).toBe(1);
        expect(first.candidates - before.candidates, `${dtype} ${name}: at least one candidate timed`).toBeGreaterThanOrEqual(1);
        expect(first.tunedCalls - before.tunedCalls).toBe(1);
        const again = await values(dt.tidy(run));
        const second = dt.cuda.matmulTuningStats();
        expect(second.shapes, `${dtype} ${name}: the choice is kept`).toBe(first.shapes);
        expect(second.candidates).toBe(first.candidates);
        expect(second.tunedCalls - first.tunedCalls).toBe(1);
        expect(again, `${dtype} ${name}: the kept kernel gives the chosen one's bits`).toEqual(got);
        const expected = await values(dt.tidy(reference));
        expect(worst(got, expected), `${dtype} ${name}`).toBeLessThan(1e-2);
      }
      dt.dispose([joined, x, w, b]);
    }
  });
});
