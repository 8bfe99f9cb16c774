// linear(x, W, b) on GPUs where x [B, N, K] is a part of a larger tensor split by rows (the image
// or text part of a joint attention's output, batch > 1): each batch is a row-major [N, K]
// matrix, but the batches are further apart than N·K, so one [B·N, K] matrix would need a copy of
// x. The kernel runs one matmul per batch on the parts where they are (native/core/operators/
// nn.cpp, linearPerBatch). The oracle is the same linear on a contiguous copy of x; the trace
// shows that no copy of x ran.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

async function values(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.data()) as Float32Array); // 16-bit floats widen exactly
  t.dispose();
  return v;
}

// the largest |a - b| over |b| + 1 (a bfloat16 matmul's rounding, whatever cuBLAS's tiles)
function worst(a: number[], b: number[]): number {
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!) / (Math.abs(b[i]!) + 1)), 0);
}

describe('linear over batches spaced apart', () => {
  it.skipIf(onGpu)(`equals linear on a contiguous copy, without copying x${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    for (const dtype of ['bfloat16', 'float32'] as const) {
      for (const bias of [true, false]) {
        // [2, 48 + 16, 64] joined tokens, split: the first 48 tokens of each batch
        const joined = dt.tidy(() => dt.randn([2, 64, 64], { seed: 21, mesh: gpu }).to(dtype));
        const w = dt.tidy(() => dt.randn([96, 64], { seed: 22, mesh: gpu }).mul(0.1).to(dtype));
        const b = bias ? dt.tidy(() => dt.randn([96], { seed: 23, mesh: gpu }).to(dtype)) : undefined;
        const part = () => joined.narrow(1, 0, 48);
        const trace = await dt.cuda.traceKernels(async () => {
          await values(dt.tidy(() => dt.F.linear(part(), w, b)));
        }, { top: 50 });
        // a strided copy (LibTorch's non-vectorized kernel) would be x made one matrix. In
        // float32 cuBLAS's path without an epilogue copies the bias into the output first (so
        // does at::linear's), which looks the same: checked in bfloat16, the models' dtype
        const copies = trace.top.filter((k) => k.name.includes('direct_copy') && k.name.includes('gpu_kernel_impl_nocast'));
        if (dtype === 'bfloat16') expect(copies.map((k) => k.name), `${dtype} bias ${bias}: no copy of x`).toEqual([]);
        const got = await values(dt.tidy(() => dt.F.linear(part(), w, b)));
        const expected = await values(dt.tidy(() => dt.F.linear(part().contiguous(), w, b)));
        expect(got.length).toBe(2 * 48 * 96);
        expect(worst(got, expected), `${dtype} bias ${bias}`).toBeLessThan(dtype === 'float32' ? 1e-5 : 1e-2);
        dt.dispose([joined, w, b]);
      }
    }
  });

  it.skipIf(onGpu)(`leaves other layouts to LibTorch, with the same values${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const x = dt.tidy(() => dt.randn([3, 20, 32], { seed: 31, mesh: gpu }).to('bfloat16'));
    const w = dt.tidy(() => dt.randn([16, 32], { seed: 32, mesh: gpu }).to('bfloat16'));
    // columns split (a batch is not one row-major matrix), and batches one after another
    for (const input of [() => x.narrow(2, 0, 16), () => x.narrow(0, 1, 2)]) {
      const weight = input().shape[2] === 16 ? dt.tidy(() => w.narrow(1, 0, 16)) : w;
      const got = await values(dt.tidy(() => dt.F.linear(input(), weight)));
      const expected = await values(dt.tidy(() => dt.F.linear(input().contiguous(), weight)));
      expect(worst(got, expected)).toBeLessThan(1e-2);
      if (weight !== w) weight.dispose();
    }
    dt.dispose([x, w]);
  });
});
