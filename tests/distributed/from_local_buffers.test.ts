// dt.fromLocalBuffers: a distributed tensor from each rank's own piece (DTensor.from_local),
// on CPU meshes with even and uneven shards, shared Replicate pieces, Partial, dtype conversion
// on the way, and byte counts checked against each rank's local shape.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

// Each rank's piece, written out by hand from torch.chunk sizes (mesh dims applied in order,
// rank = row-major mesh coordinates) rather than computed by dt.localPieceOf, the helper
// fromLocalBuffers itself uses.
type Piece = { offset: number[]; shape: number[] };

// The piece's share of the row-major values 0..n-1 of `shape`, as float32 bytes.
function pieceBytes(shape: number[], piece: Piece): Uint8Array {
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const values: number[] = [];
  const visit = (d: number, at: number) => {
    if (d === shape.length) return void values.push(at);
    for (let i = piece.offset[d]!; i < piece.offset[d]! + piece.shape[d]!; i++) visit(d + 1, at + i * strides[d]!);
  };
  visit(0, 0);
  return new Uint8Array(new Float32Array(values).buffer);
}

const at = (offset: number[], shape: number[]): Piece => ({ offset, shape });
const cases: { name: string; mesh: () => dt.DeviceMesh; shape: number[]; placements: dt.Placement[]; pieces: Piece[] }[] = [
  { name: 'S(0) over 2', mesh: () => new dt.DeviceMesh('cpu', [0, 1]), shape: [6, 4], placements: [dt.Shard(0)], pieces: [at([0, 0], [3, 4]), at([3, 0], [3, 4])] },
  {
    name: 'uneven S(0): 11 over 4 (3, 3, 3, 2)',
    mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3]),
    shape: [11, 2],
    placements: [dt.Shard(0)],
    pieces: [at([0, 0], [3, 2]), at([3, 0], [3, 2]), at([6, 0], [3, 2]), at([9, 0], [2, 2])],
  },
  {
    name: 'uneven S(1): 5 over 3 (2, 2, 1)',
    mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2]),
    shape: [3, 5],
    placements: [dt.Shard(1)],
    pieces: [at([0, 0], [3, 2]), at([0, 2], [3, 2]), at([0, 4], [3, 1])],
  },
  {
    name: 'empty pieces: 2 over 4',
    mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3]),
    shape: [2, 3],
    placements: [dt.Shard(0)],
    pieces: [at([0, 0], [1, 3]), at([1, 0], [1, 3]), at([2, 0], [0, 3]), at([2, 0], [0, 3])],
  },
  {
    // 5 rows over dim 0 (3, 2), 3 columns over dim 1 (2, 1)
    name: '2x2 mesh [S(0), S(1)]',
    mesh: () => dt.initDeviceMesh('cpu', [2, 2]),
    shape: [5, 3, 2],
    placements: [dt.Shard(0), dt.Shard(1)],
    pieces: [at([0, 0, 0], [3, 2, 2]), at([0, 2, 0], [3, 1, 2]), at([3, 0, 0], [2, 2, 2]), at([3, 2, 0], [2, 1, 2])],
  },
  {
    name: '2x2 mesh [R, S(2)]',
    mesh: () => dt.initDeviceMesh('cpu', [2, 2]),
    shape: [2, 3, 5],
    placements: [dt.Replicate(), dt.Shard(2)],
    pieces: [at([0, 0, 0], [2, 3, 3]), at([0, 0, 3], [2, 3, 2]), at([0, 0, 0], [2, 3, 3]), at([0, 0, 3], [2, 3, 2])],
  },
  {
    // 7 rows: (4, 3) over dim 0, then each of those over dim 1: (2, 2) and (2, 1)
    name: '2x2 mesh S(0) twice',
    mesh: () => dt.initDeviceMesh('cpu', [2, 2]),
    shape: [7, 2],
    placements: [dt.Shard(0), dt.Shard(0)],
    pieces: [at([0, 0], [2, 2]), at([2, 0], [2, 2]), at([4, 0], [2, 2]), at([6, 0], [1, 2])],
  },
];

describe('fromLocalBuffers', () => {
  it.each(cases)('$name: each rank gets its piece and the full tensor reads back', async ({ mesh: make, shape, placements, pieces: expected }) => {
    const mesh = make();
    expect(expected.length).toBe(mesh.size);
    const pieces = expected.map((p) => pieceBytes(shape, p));
    const t = dt.fromLocalBuffers(pieces, 'float32', shape, { mesh, placements });
    expect(t.shape).toEqual(shape);
    expect(t.placements.map(String)).toEqual(placements.map(String));
    expect(dt.localShapes(t)).toEqual(expected.map((p) => p.shape));
    expect(expected.map((_, r) => dt.localPieceOf(shape, placements, mesh, r))).toEqual(expected);
    const n = shape.reduce((a, b) => a * b, 1);
    expect(Array.from((await t.data()) as Float32Array)).toEqual(Array.from({ length: n }, (_, i) => i));
    for (let r = 0; r < mesh.size; r++) {
      const local = dt.toLocal(t, r);
      expect(new Uint8Array(((await local.data()) as Float32Array).buffer)).toEqual(pieces[r]);
      local.dispose();
    }
    t.dispose();
  });

  it('shares one buffer among the ranks of a Replicate group and converts the dtype on the way', async () => {
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']);
    const placements = [dt.Replicate(), dt.Shard(0)];
    const halves = [0, 1].map((r) => new Uint8Array(new Float32Array([r * 2 + 0.5, r * 2 + 1.5]).buffer));
    const t = dt.fromLocalBuffers([halves[0]!, halves[1]!, halves[0]!, halves[1]!], 'float32', [4], { mesh, placements, dtype: 'bfloat16' });
    expect(t.dtype).toBe('bfloat16');
    expect(Array.from((await t.data()) as Float32Array)).toEqual([0.5, 1.5, 2.5, 3.5]);
    t.dispose();
  });

  it('takes each piece as that rank\'s partial value under Partial', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1]);
    const t = dt.fromLocalBuffers([new Float32Array([1, 2]), new Float32Array([10, 20])].map((a) => new Uint8Array(a.buffer)), 'float32', [2], {
      mesh,
      placements: [dt.Partial()],
    });
    expect(Array.from((await t.data()) as Float32Array)).toEqual([11, 22]);
    t.dispose();
  });

  it('refuses pieces of the wrong size or count, naming the rank and its local shape', () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2]);
    const ok = (n: number) => new Uint8Array(n * 4);
    expect(() => dt.fromLocalBuffers([ok(4), ok(4), ok(4)], 'float32', [5, 2], { mesh, placements: [dt.Shard(0)] })).toThrow(
      "fromLocalBuffers: rank 2's piece has 16 bytes but its local shape [1, 2] of float32 needs 8 (global shape [5, 2], placements [S(0)])",
    );
    expect(() => dt.fromLocalBuffers([ok(4), ok(4)], 'float32', [5, 2], { mesh, placements: [dt.Shard(0)] })).toThrow(
      /Expected array of 3 Uint8Array \(one per rank of DeviceMesh\('cpu', \[0, 1, 2\]\)\) for fromLocalBuffers pieces/,
    );
    expect(() => dt.fromLocalBuffers([ok(4), ok(4), [] as unknown as Uint8Array], 'float32', [5, 2], { mesh, placements: [dt.Shard(0)] })).toThrow(
      'Expected Uint8Array for fromLocalBuffers pieces[2]',
    );
    expect(() => dt.fromLocalBuffers([ok(1), ok(1), ok(1)], 'float8' as dt.DType, [1], { mesh })).toThrow(/fromLocalBuffers sourceDtype/);
  });
});
