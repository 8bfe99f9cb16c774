// c + a·b (a mul whose product dies at an add: the controller fuses them to addcmul) runs on GPUs
// through DTorch's row kernel (native/external/cuda/kernels/addcmul_rows.cu) when an operand is
// one row per batch broadcast over the rows, as adaLN's shift, scale and gate are against the
// tokens. The oracle is LibTorch's addcmul on the same GPU with every operand made whole first
// (a layout the kernel leaves to LibTorch): the same bits. The trace shows which kernel ran.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

// [name, shapes of c, a, b]: the modulation x·(1 + scale) + shift, the gated residual x + gate·y,
// a 2-D row, batch 1
const cases: [string, number[], number[], number[]][] = [
  ['modulate', [2, 1, 64], [2, 33, 64], [2, 1, 64]],
  ['gated residual', [2, 33, 64], [2, 1, 64], [2, 33, 64]],
  ['2-D row', [40, 128], [128], [40, 128]],
  ['batch 1', [1, 7, 256], [1, 1, 256], [1, 7, 256]],
];

// the shape the three broadcast to (right-aligned, as PyTorch)
function broadcast(shapes: number[][]): number[] {
  const n = Math.max(...shapes.map((s) => s.length));
  return Array.from({ length: n }, (_, i) => Math.max(...shapes.map((s) => s[s.length - n + i] ?? 1)));
}

async function values(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.data()) as Float32Array); // 16-bit floats widen exactly
  t.dispose();
  return v;
}

describe('addcmul row kernel', () => {
  it.skipIf(onGpu)(`gives LibTorch's bits for broadcast rows${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      for (const [name, ...shapes] of cases) {
        const [c, a, b] = shapes.map((s, i) => dt.tidy(() => dt.randn(s, { seed: 11 + i, mesh: gpu }).mul(3).to(dtype)));
        const out = broadcast(shapes);
        const trace = await dt.cuda.traceKernels(async () => {
          await values(dt.tidy(() => a!.mul(b!).add(c!)));
        }, { top: 20 });
        expect(trace.top.map((k) => k.name).some((n) => n.includes('addcmulRowsKernel')), `${name} ${dtype}: DTorch's kernel ran`).toBe(true);
        const got = await values(dt.tidy(() => a!.mul(b!).add(c!)));
        const whole = (t: dt.Tensor) => t.expand(out).contiguous();
        const expected = await values(dt.tidy(() => whole(a!).mul(whole(b!)).add(whole(c!))));
        const first = got.findIndex((v, i) => !Object.is(v, expected[i]));
        expect(first, `${name} ${dtype}: element ${first} is ${got[first]}, LibTorch gives ${expected[first]}`).toBe(-1);
        dt.dispose([c, a, b]);
      }
    }
  });

  it.skipIf(onGpu)(`reads a strided row (a chunk of adaLN's projection) and leaves whole operands to LibTorch${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const emb = dt.tidy(() => dt.randn([2, 3 * 64], { seed: 3, mesh: gpu }).to('bfloat16'));
    const x = dt.tidy(() => dt.randn([2, 9, 64], { seed: 4, mesh: gpu }).to('bfloat16'));
    const y = dt.tidy(() => dt.randn([2, 9, 64], { seed: 5, mesh: gpu }).to('bfloat16'));
    const gated = () => x.add(emb.chunk(3, 1)[1]!.unsqueeze(1).mul(y)); // the gate: a [2, 64] view with row stride 192
    const names = async (f: () => dt.Tensor) => (await dt.cuda.traceKernels(async () => void (await values(dt.tidy(f))), { top: 20 })).top.map((k) => k.name);
    expect((await names(gated)).some((n) => n.includes('addcmulRowsKernel'))).toBe(true);
    expect((await names(() => x.add(y.mul(x)))).some((n) => n.includes('addcmulRowsKernel')), 'whole operands: LibTorch').toBe(false);
    const got = await values(dt.tidy(gated));
    const expected = await values(dt.tidy(() => x.add(emb.chunk(3, 1)[1]!.unsqueeze(1).expand([2, 9, 64]).contiguous().mul(y))));
    expect(got).toEqual(expected);
    dt.dispose([emb, x, y]);
  });
});
