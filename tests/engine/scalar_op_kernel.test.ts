// A small GPU tensor plus, minus or times a scalar runs through DTorch's own kernel
// (native/external/cuda/kernels/scalar_elementwise.cu); anything else it leaves to LibTorch.
// The oracle is LibTorch's kernel on the same GPU, which converts the scalar as it does for
// PyTorch: the same values through a transposed view (not contiguous: LibTorch's path) must
// give the same bits. The trace shows which kernel ran, so the oracle is known to be LibTorch.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);

type Op = (x: dt.Tensor) => dt.Tensor;
const ops: [string, Op][] = [
  ['add 0.1', (x) => x.add(0.1)],
  ['add int 7', (x) => x.add(7)],
  ['add 1e30', (x) => x.add(1e30)],
  ['sub 0.3', (x) => x.sub(0.3)],
  ['mul 0.1', (x) => x.mul(0.1)],
  ['mul -3', (x) => x.mul(-3)],
  ['mul 3e38 (overflows float16)', (x) => x.mul(3e38)],
];
const dtypes = ['float32', 'bfloat16', 'float16'] as const;
// [rows, cols]: contiguous, these reach the kernel (at most 65,536 elements); the last does not
const shapes = [
  [2, 3],
  [24, 40],
  [256, 256],
  [257, 256],
];

async function bits(t: dt.Tensor): Promise<number[]> {
  // data() widens 16-bit floats to float32 exactly: equal arrays mean equal bits
  const values = Array.from((await t.data()) as Float32Array);
  t.dispose();
  return values;
}

describe('scalar elementwise kernel', () => {
  it.skipIf(onGpu)(`gives LibTorch's bits on the same GPU${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    for (const [rows, cols] of shapes) {
      for (const dtype of dtypes) {
        // x contiguous [rows, cols]; xT the same values as a transposed view of a [cols, rows] tensor
        const x = dt.tidy(() => dt.randn([rows!, cols!], { seed: 5, mesh: gpu }).mul(4).to(dtype));
        const xT = dt.tidy(() => dt.randn([rows!, cols!], { seed: 5, mesh: gpu }).mul(4).to(dtype).transpose(0, 1).mul(1).transpose(0, 1));
        for (const [opName, op] of ops) {
          const got = await bits(op(x));
          const expected = await bits(dt.tidy(() => op(xT)));
          expect(got.length).toBe(expected.length);
          const first = got.findIndex((v, i) => !Object.is(v, expected[i]));
          expect(first, `${opName} on [${rows}, ${cols}] ${dtype}: element ${first} is ${got[first]}, LibTorch gives ${expected[first]}`).toBe(-1);
        }
        dt.dispose([x, xT]);
      }
    }
  });

  it.skipIf(onGpu)(`serves small contiguous tensors and leaves larger ones to LibTorch${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    const kernelsOf = async (shape: number[], transposed = false) => {
      const x = dt.tidy(() => (transposed ? dt.ones(shape, { mesh: gpu, dtype: 'bfloat16' }).transpose(0, 1) : dt.ones(shape, { mesh: gpu, dtype: 'bfloat16' })));
      await dt.sync();
      const trace = await dt.cuda.traceKernels(async () => {
        const outs = [x.add(1), x.mul(0.5), x.sub(2)];
        await dt.sync();
        dt.dispose(outs);
      });
      x.dispose();
      return trace.top.map((k) => k.name);
    };
    const small = await kernelsOf([64, 64]);
    expect(small.filter((name) => name.includes('scalarOpKernel')).length, small.join(', ')).toBeGreaterThanOrEqual(2); // add (sub is an add) and mul
    for (const [what, names] of [
      ['larger than 65,536 elements', await kernelsOf([512, 512])],
      ['a transposed view', await kernelsOf([64, 64], true)],
    ] as const) {
      expect(names.some((name) => name.includes('scalarOpKernel')), `${what}: ${names.join(', ')}`).toBe(false);
      expect(names.length, `${what}: LibTorch's kernels ran`).toBeGreaterThan(0);
    }
  });
});
