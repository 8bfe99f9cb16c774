// CLIP's QuickGELU, x · sigmoid(1.702 x), runs on GPUs in one kernel
// (native/external/cuda/kernels/quick_gelu.cu) where LibTorch runs three; its bits are those of
// the three ops (x · 1.702, sigmoid, the product) run one by one. The trace shows which kernel
// ran; a strided input goes to LibTorch's kernels with the same values.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

async function bits(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.to('float32').data()) as Float32Array);
  t.dispose();
  return v;
}

describe('quick_gelu kernel', () => {
  it.skipIf(onGpu)(`has the bits of the three ops, in one kernel${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      // CLIP-L's MLP activation [1, 77, 3072], an odd size, and values far out on both sides
      for (const [shape, spread] of [[[1, 77, 3072], 3], [[3, 5, 7], 3], [[4096], 40]] as const) {
        const x = dt.tidy(() => dt.randn([...shape], { seed: 61, mesh: gpu }).mul(spread).to(dtype));
        const what = `${JSON.stringify(shape)} ${dtype}`;
        let got: number[] = [];
        const trace = await dt.cuda.traceKernels(async () => {
          got = await bits(dt.tidy(() => dt.quickGelu(x)));
        }, { top: 30 });
        const names = trace.top.map((k) => k.name);
        expect(names.some((n) => n.includes('quickGeluKernel')), `${what}: DTorch's kernel ran`).toBe(true);
        expect(names.some((n) => n.includes('sigmoid')), `${what}: no LibTorch sigmoid`).toBe(false);
        const want = await bits(dt.tidy(() => x.mul(1.702).sigmoid().mul(x)));
        expect(got, what).toEqual(want);
        x.dispose();
      }
    }
  });

  it.skipIf(onGpu)(`leaves a strided input to LibTorch's kernels, with the same values${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const x = dt.tidy(() => dt.randn([64, 48], { seed: 62, mesh: gpu }).mul(3).to('bfloat16'));
    let got: number[] = [];
    const trace = await dt.cuda.traceKernels(async () => {
      got = await bits(dt.tidy(() => dt.quickGelu(x.transpose(0, 1))));
    }, { top: 30 });
    expect(trace.top.some((k) => k.name.includes('quickGeluKernel'))).toBe(false);
    expect(got).toEqual(await bits(dt.tidy(() => { const t = x.transpose(0, 1); return t.mul(1.702).sigmoid().mul(t); })));
    x.dispose();
  });
});
