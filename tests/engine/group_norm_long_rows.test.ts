// Group norm over long rows on GPUs (native/external/cuda/group_norm.cpp): few (sample, group)
// rows of tens of thousands of values, as in a VAE decoder, go through LibTorch's reductions
// instead of its one-block-per-row kernel. The values must equal the CPU's within one rounding,
// and the trace must show which path ran (LibTorch's kernel computes its statistics in
// RowwiseMomentsCUDAKernel).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const cpu = new dt.DeviceMesh('cpu', [0]);
const onGpu = cudaSkip(1);

// [N, C, H, W], groups: the first two have rows of 32,768 and 36,864 values (the long-row path)
const cases: [number[], number][] = [
  [[1, 64, 128, 128], 32],
  [[2, 128, 96, 96], 32],
  [[2, 8, 8, 8], 4], // short rows: LibTorch's kernel
];

async function values(t: dt.Tensor): Promise<Float32Array> {
  const out = (await t.data()) as Float32Array;
  t.dispose();
  return out;
}

describe('group norm over long rows', () => {
  it.skipIf(onGpu)(`equals the CPU within one rounding${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    for (const [shape, groups] of cases) {
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const run = (mesh: dt.DeviceMesh) =>
          dt.tidy(() => {
            const x = dt.randn(shape, { seed: 21, mesh }).mul(3).add(0.7).to(dtype);
            const weight = dt.rand([shape[1]!], { seed: 22, mesh }).add(0.5).to(dtype);
            const bias = dt.randn([shape[1]!], { seed: 23, mesh }).to(dtype);
            return dt.F.groupNorm(x, groups, { weight, bias, eps: 1e-5 });
          });
        const expected = await values(run(cpu));
        const got = await values(run(gpu));
        expect(got.length).toBe(expected.length);
        // float32: summation order only; bfloat16: one rounding of a float32 result (2^-8 relative), with margin
        const tolerance = dtype === 'float32' ? 1e-5 : 2 ** -7;
        let worst = 0;
        for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i]! - expected[i]!) / Math.max(1, Math.abs(expected[i]!)));
        expect(worst, `[${shape}] ${groups} groups ${dtype}`).toBeLessThanOrEqual(tolerance);
      }
    }
  });

  it.skipIf(onGpu)(`takes the reductions for long rows and LibTorch's kernel for short ones${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const kernelsOf = async (shape: number[], groups: number) => {
      const x = dt.randn(shape, { seed: 1, mesh: gpu, dtype: 'bfloat16' });
      await dt.sync();
      const trace = await dt.cuda.traceKernels(async () => {
        const y = dt.F.groupNorm(x, groups);
        await dt.sync();
        y.dispose();
      }, { top: 50 });
      x.dispose();
      return trace.top.map((k) => k.name);
    };
    const long = await kernelsOf([1, 64, 128, 128], 32);
    expect(long.some((name) => name.includes('RowwiseMoments')), long.join(', ')).toBe(false);
    const short = await kernelsOf([2, 8, 8, 8], 4);
    expect(short.some((name) => name.includes('RowwiseMoments')), short.join(', ')).toBe(true);
  });
});
