// c + layer_norm(x) · b (adaLN's modulation: a parameter-free layer norm, a mul and an add the
// controller fuses into layer_norm_addcmul) runs on GPUs through DTorch's row kernel
// (native/external/cuda/kernels/layer_norm_addcmul_rows.cu): x read once, y written once. The
// oracle is the same ops with the norm kept by the program (LibTorch's layer norm, then the
// addcmul): within one rounding of the norm, as the kernel's statistics are summed in another
// order than LibTorch's. The trace shows which kernels ran; a norm with a weight, or a row the
// kernel does not take, goes to LibTorch with the same values. An affine norm (a weight and a
// bias: CLIP's) runs through the same kernel, within a rounding of LibTorch's on the CPU.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

async function values(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.to('float32').data()) as Float32Array);
  t.dispose();
  return v;
}

// one ulp of the type at 1, times 3: the norm rounded once either way, then the multiply-add
const tolerance = { bfloat16: 3 * 2 ** -8, float16: 3 * 2 ** -11, float32: 1e-5 } as const;
const worst = (got: number[], want: number[]) => got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!) / Math.max(1, Math.abs(want[i]!))), 0);

describe('layer_norm_addcmul row kernel', () => {
  it.skipIf(onGpu)(`equals layer_norm then addcmul, in one kernel${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    // [x shape, shift shape, scale shape]: SD3's and Flux's rows, whole shifts, a 2-D case
    const cases: [number[], number[], number[]][] = [
      [[2, 33, 1536], [2, 1, 1536], [2, 1, 1536]],
      [[1, 17, 3072], [1, 1, 3072], [1, 1, 3072]],
      [[2, 9, 4096], [2, 9, 4096], [2, 1, 4096]],
      [[40, 64], [64], [40, 64]],
    ];
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      for (const [xs, cs, bs] of cases) {
        if (dtype === 'float32' && xs.at(-1)! > 2048) continue; // past the kernel's float32 rows: LibTorch's (checked below)
        const [x, shift, scale] = [xs, cs, bs].map((s, i) => dt.tidy(() => dt.randn(s, { seed: 31 + i, mesh: gpu }).mul(i === 0 ? 3 : 1).add(i === 0 ? 1 : 0).to(dtype)));
        const what = `${JSON.stringify(xs)} ${dtype}`;
        const modulated = () => dt.F.layerNorm(x!, [xs.at(-1)!]).mul(scale!).add(shift!);
        let got: number[] = [];
        const trace = await dt.cuda.traceKernels(async () => {
          got = await values(dt.tidy(modulated));
        }, { top: 30 });
        const names = trace.top.map((k) => k.name);
        expect(names.some((n) => n.includes('layerNormAddcmulRowsKernel')), `${what}: DTorch's kernel ran`).toBe(true);
        expect(names.some((n) => n.includes('layer_norm_kernel')), `${what}: no LibTorch layer norm`).toBe(false);
        const kept = dt.keep(dt.F.layerNorm(x!, [xs.at(-1)!]));
        const want = await values(dt.tidy(() => kept.mul(scale!).add(shift!)));
        kept.dispose();
        expect(got.length).toBe(want.length);
        expect(worst(got, want), what).toBeLessThanOrEqual(tolerance[dtype]);
        dt.dispose([x, shift, scale]);
      }
    }
  });

  it.skipIf(onGpu)(`folds 1 + scale into the same kernel (layer_norm_modulate), with the bits of the add before it${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    // SD3's and Flux's rows, a whole shift
    const cases: [number[], number[], number[]][] = [
      [[2, 33, 1536], [2, 1, 1536], [2, 1, 1536]],
      [[1, 17, 3072], [1, 17, 3072], [1, 1, 3072]],
    ];
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      for (const [xs, cs, bs] of cases) {
        if (dtype === 'float32' && xs.at(-1)! > 2048) continue; // past the kernel's float32 rows
        const [x, shift, scale] = [xs, cs, bs].map((s, i) => dt.tidy(() => dt.randn(s, { seed: 61 + i, mesh: gpu }).mul(i === 0 ? 3 : 0.3).to(dtype)));
        const what = `${JSON.stringify(xs)} ${dtype}`;
        await dt.sync(); // the inputs' own kernels before the trace
        let got: number[] = [];
        const trace = await dt.cuda.traceKernels(async () => {
          got = await values(dt.tidy(() => dt.F.layerNorm(x!, [xs.at(-1)!]).mul(scale!.add(1)).add(shift!)));
        }, { top: 30 });
        const names = trace.top.map((k) => k.name);
        expect(names.filter((n) => n.includes('layerNormAddcmulRowsKernel')).length, `${what}: DTorch's kernel ran`).toBe(1);
        expect(names.filter((n) => /scalarOpKernel|Functor(OnSelf)?_add/.test(n)), `${what}: no add of its own`).toEqual([]);
        // the sum kept by the program: its own add, then the same kernel over it
        const sum = dt.keep(scale!.add(1));
        const want = await values(dt.tidy(() => dt.F.layerNorm(x!, [xs.at(-1)!]).mul(sum).add(shift!)));
        sum.dispose();
        expect(got, what).toEqual(want);
        dt.dispose([x, shift, scale]);
      }
    }
  });

  it.skipIf(onGpu)(`runs an affine norm in the row kernel, within a rounding of LibTorch's${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const cpu = new dt.DeviceMesh('cpu', [0]);
    // CLIP-L's and CLIP-G's rows, SD3's, a 2-D case
    const cases = [[1, 77, 768], [1, 77, 1280], [2, 33, 1536], [40, 64]];
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      for (const xs of cases) {
        const d = xs.at(-1)!;
        const [x, weight, bias] = [xs, [d], [d]].map((s, i) => dt.tidy(() => dt.randn(s, { seed: 51 + i, mesh: gpu }).mul(i === 0 ? 3 : 1).add(1).to(dtype)));
        const what = `${JSON.stringify(xs)} ${dtype}`;
        let got: number[] = [];
        const trace = await dt.cuda.traceKernels(async () => {
          got = await values(dt.tidy(() => dt.F.layerNorm(x!, [d], { weight: weight!, bias: bias!, eps: 1e-5 })));
        }, { top: 30 });
        const names = trace.top.map((k) => k.name);
        expect(names.some((n) => n.includes('layerNormAddcmulRowsKernel')), `${what}: DTorch's kernel ran`).toBe(true);
        expect(names.some((n) => n.includes('layer_norm_kernel')), `${what}: no LibTorch layer norm`).toBe(false);
        // the same values on the CPU (bfloat16 and float16 read exactly as float32), LibTorch's norm there
        const onCpu = async (t: dt.Tensor) => {
          const host = Array.from((await dt.tidy(() => t.to('float32')).data()) as Float32Array);
          return dt.tidy(() => dt.tensor(host, { mesh: cpu }).reshape(t.shape).to(dtype));
        };
        const [cx, cw, cb] = [await onCpu(x!), await onCpu(weight!), await onCpu(bias!)];
        const want = await values(dt.tidy(() => dt.F.layerNorm(cx, [d], { weight: cw, bias: cb, eps: 1e-5 })));
        expect(worst(got, want), what).toBeLessThanOrEqual(tolerance[dtype]);
        dt.dispose([x, weight, bias, cx, cw, cb]);
      }
    }
  });

  it.skipIf(onGpu)(`leaves a norm with a weight, and rows it does not take, to LibTorch${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    // [x shape, dtype, with a weight]: a weight; a row not a multiple of 16 bytes; past the longest row
    const cases: [number[], dt.DType, boolean][] = [
      [[2, 7, 256], 'bfloat16', true],
      [[2, 7, 100], 'bfloat16', false],
      [[2, 7, 3072], 'float32', false],
    ];
    for (const [xs, dtype, affine] of cases) {
      const d = xs.at(-1)!;
      const make = (s: number[], seed: number) => dt.tidy(() => dt.randn(s, { seed, mesh: gpu }).to(dtype));
      const [x, shift, scale, weight] = [make(xs, 41), make([xs[0]!, 1, d], 42), make([xs[0]!, 1, d], 43), make([d], 44)];
      const norm = () => dt.F.layerNorm(x, [d], affine ? { weight } : {});
      let got: number[] = [];
      const trace = await dt.cuda.traceKernels(async () => {
        got = await values(dt.tidy(() => norm().mul(scale).add(shift)));
      }, { top: 30 });
      expect(trace.top.some((k) => k.name.includes('layerNormAddcmulRowsKernel')), JSON.stringify(xs)).toBe(false);
      const kept = dt.keep(norm());
      const want = await values(dt.tidy(() => kept.mul(scale).add(shift)));
      kept.dispose();
      expect(got).toEqual(want); // LibTorch's norm either way
      dt.dispose([x, shift, scale, weight]);
    }
  });
});
