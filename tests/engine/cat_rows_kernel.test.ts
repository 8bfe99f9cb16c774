// cat of strided parts on a GPU runs through DTorch's row copy (native/external/cuda/kernels/
// cat_rows.cu) where LibTorch's cat would take them element by element: parts whose rows are
// contiguous and a multiple of 16 bytes, such as the head-major views of token-major keys that
// SD3's joint attention joins. The oracle is the same cat on the CPU: a copy, so the same bits.
// The trace shows which kernel ran.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const onGpu = cudaSkip(1);
const cpu = new dt.DeviceMesh('cpu', [0]);

// token-major [B, N, H, D] values on `mesh`, as the head-major view [B, H, N, D]
function headMajorView(shape: [number, number, number, number], seed: number, dtype: dt.DType, mesh: dt.DeviceMesh): dt.Tensor {
  return dt.tidy(() => dt.randn(shape, { seed, mesh }).mul(4).to(dtype).transpose(1, 2));
}

async function valuesOf(t: dt.Tensor): Promise<number[]> {
  // data() widens 16-bit floats to float32 exactly, and int64 to bigint: equal arrays mean equal bits
  const values = Array.from((await t.data()) as ArrayLike<number | bigint>, Number);
  t.dispose();
  return values;
}

// The kernels one cat on the GPU ran, and whether its values are the CPU's.
async function catOnBoth(shapes: [number, number, number, number][], dim: number, dtype: dt.DType): Promise<string[]> {
  const gpu = cudaMesh(1);
  const parts = shapes.map((s, i) => headMajorView(s, i + 1, dtype, gpu));
  const host = shapes.map((s, i) => headMajorView(s, i + 1, dtype, cpu));
  await dt.sync();
  let out: dt.Tensor | undefined;
  const trace = await dt.cuda.traceKernels(async () => {
    out = dt.cat(parts, dim);
    await dt.sync();
  });
  const expected = dt.cat(host, dim);
  expect(out!.shape).toEqual(expected.shape);
  const [got, want] = [await valuesOf(out!), await valuesOf(expected)];
  const first = got.findIndex((v, i) => !Object.is(v, want[i]));
  expect(first, `cat of ${JSON.stringify(shapes)} along ${dim} (${dtype}): element ${first} is ${got[first]}, the CPU gives ${want[first]}`).toBe(-1);
  dt.dispose([parts, host]);
  return trace.top.map((k) => k.name);
}

describe('cat row copy', () => {
  it.skipIf(onGpu)(`joins head-major views of token-major parts with the CPU's bits${skipNote(onGpu)}`, async () => {
    const cases: [[number, number, number, number][], number, dt.DType][] = [
      [[[2, 5, 3, 8], [2, 4, 3, 8]], 2, 'bfloat16'], // keys of two streams joined along the tokens
      [[[2, 5, 3, 8], [2, 4, 3, 8]], 2, 'float16'],
      [[[1, 7, 2, 4], [1, 1, 2, 4], [1, 3, 2, 4]], 2, 'float32'], // three parts, rows of 16 bytes
      [[[1, 6, 4, 64], [1, 333, 4, 64]], 2, 'bfloat16'], // SD3's 333 text tokens
      [[[2, 3, 2, 8], [1, 3, 2, 8]], 0, 'float32'], // along the batch
      [[[2, 3, 2, 8], [2, 3, 5, 8]], 1, 'int64'], // along the heads: any dtype is a copy
      [[[2, 0, 2, 8], [2, 4, 2, 8]], 2, 'float32'], // an empty part
    ];
    for (const [shapes, dim, dtype] of cases) {
      const kernels = await catOnBoth(shapes, dim, dtype);
      expect(kernels.some((name) => name.includes('copyRowsKernel')), `${JSON.stringify(shapes)} ${dtype}: ${kernels.join(', ')}`).toBe(true);
    }
  });

  it.skipIf(onGpu)(`leaves contiguous parts and rows off 16 bytes to LibTorch${skipNote(onGpu)}`, async () => {
    const gpu = cudaMesh(1);
    // rows of 3 float32 (12 bytes): LibTorch's strided cat, the same values
    const odd = await catOnBoth([[1, 4, 2, 3], [1, 2, 2, 3]], 2, 'float32');
    expect(odd.some((name) => name.includes('copyRowsKernel')), odd.join(', ')).toBe(false);
    // contiguous parts: LibTorch's vectorized cat
    const parts = [dt.randn([2, 5, 64], { seed: 1, mesh: gpu }), dt.randn([2, 3, 64], { seed: 2, mesh: gpu })];
    await dt.sync();
    const trace = await dt.cuda.traceKernels(async () => {
      const out = dt.cat(parts, 1);
      await dt.sync();
      out.dispose();
    });
    const names = trace.top.map((k) => k.name);
    expect(names.some((name) => name.includes('copyRowsKernel')), names.join(', ')).toBe(false);
    expect(names.some((name) => name.includes('CatArrayBatchedCopy')), names.join(', ')).toBe(true);
    dt.dispose(parts);
  });
});
