// How patch parallel cuts an image's rows: decoding in torch.chunk pieces (none empty, fewer
// pieces than devices when the rows are few); encoding in whole latent rows (2^downsamplings
// image rows each), the last piece taking the rows that make no whole latent row, so that every
// piece but the last stays even through each downsampling. Dim choices resolve to mesh dims.
import { expect, test } from 'vitest';
import * as dt from '@dtorch/api';
import { patchParallelDims, splitRows } from './patch_parallel.js';

test('decoding splits latent rows as torch.chunk, leaving empty pieces out', () => {
  expect(splitRows(7, 3, { kind: 'decode' })).toEqual([3, 3, 1]);
  expect(splitRows(7, 2, { kind: 'decode' })).toEqual([4, 3]);
  expect(splitRows(4, 3, { kind: 'decode' })).toEqual([2, 2]);
  expect(splitRows(1, 3, { kind: 'decode' })).toEqual([1]);
});

test('encoding splits image rows in whole latent rows, the rest to the last piece', () => {
  const threeLevels = { kind: 'encode', downsamplings: 3 } as const;
  expect(splitRows(56, 3, threeLevels)).toEqual([24, 24, 8]);
  expect(splitRows(30, 2, threeLevels)).toEqual([16, 14]);
  expect(splitRows(17, 2, threeLevels)).toEqual([8, 9]);
  // one latent row or none: nothing to split
  expect(splitRows(12, 3, threeLevels)).toEqual([12]);
  expect(splitRows(5, 3, threeLevels)).toEqual([5]);
});

test('a dim choice resolves to mesh dims: true every dim, false none, names theirs; a name the mesh lacks is INVALID_MESH', () => {
  const mesh = dt.initDeviceMesh('cpu', [1, 1], ['dp', 'ulysses']);
  expect(patchParallelDims('dims', mesh, true)).toEqual([0, 1]);
  expect(patchParallelDims('dims', mesh, false)).toEqual([]);
  expect(patchParallelDims('dims', mesh, 'ulysses')).toEqual([1]);
  expect(patchParallelDims('dims', mesh, ['ulysses', 'dp', 'ulysses'])).toEqual([1, 0]);
  expect(() => patchParallelDims('dims', mesh, ['ring'])).toThrow("dims: 'ring' is not a dim of the VAE's mesh");
  expect(() => patchParallelDims('dims', mesh, ['ring'])).toThrow(expect.objectContaining({ code: 'INVALID_MESH' }));
  expect(() => patchParallelDims('dims', mesh, 3)).toThrow('dims must be true, false, a mesh dim name or a list of them, got 3');
});
