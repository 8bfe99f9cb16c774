// Bad input that only CUDA refuses, refused at the call there too: LibTorch has no CUDA kernel
// for integer matmul (cuBLAS multiplies floats), so an int64 matmul on a CUDA mesh would fail
// only when read. (packages/api/src/ops/bad_input.test.ts holds the cases of every device.)
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from './meshes.js';

const skip = cudaSkip(1);

describe('bad input on CUDA', () => {
  it.skipIf(skip)(`integer matmul and linear are refused at the call${skipNote(skip)}`, async () => {
    const mesh = cudaMesh(1);
    const ints = dt.ones([2, 2], { dtype: 'int64', mesh });
    const before = dt.memory().numTensors;
    expect(() => ints.matmul(ints)).toThrow(expect.objectContaining({ code: 'DTYPE_MISMATCH', message: expect.stringContaining('has no CUDA kernel') }));
    expect(() => dt.F.linear(ints, ints)).toThrow(expect.objectContaining({ code: 'DTYPE_MISMATCH' }));
    expect(dt.memory().numTensors).toBe(before);
    // the float matmul of the same values runs
    expect(await ints.to('float32').matmul(ints.to('float32')).array()).toEqual([[2, 2], [2, 2]]);
  });
});
