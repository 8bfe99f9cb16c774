// dt.joinShards / dt.splitShards: cat and split piece by piece, with no communication. On one
// device, and where the dim is not split, they are cat and split; where it is split (1-D meshes
// of 2 and 4 CPU devices, 2x2 meshes splitting it over one or both mesh dims, other dims split
// too; 8 devices), each rank's piece of the join is its pieces of the parts in order, so the global order
// is part 0's piece 0, part 1's piece 0, ... (not cat's), and splitShards gives the parts back.
// Uneven lengths work where the pieces add up to torch.chunk's (7 + 8 over 4: 2+2, 2+2, 2+2,
// 1+2 = 15's 4, 4, 4, 3); where they do not (5 + 8 over 4: 5 is 2, 2, 1, 0) both refuse at the
// call with SHAPE_MISMATCH naming the rank and the sizes, and parts placed differently with
// PLACEMENT_MISMATCH.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const one = () => new dt.DeviceMesh('cpu', [0]);
// [1, n, 2] with distinct values: token t of a part starting at `base` holds base + t
const tokens = (n: number, base: number, mesh: dt.DeviceMesh) =>
  dt.tidy(() => dt.arange(0, 2 * n, 1, { dtype: 'float32', mesh }).reshape([1, n, 2]).div(2).floor().add(base));
const values = async (t: dt.Tensor) => Array.from((await t.data()) as Float32Array);

// torch.chunk's piece sizes of n over `parts`
const chunks = (n: number, parts: number) => {
  const each = Math.ceil(n / parts);
  return Array.from({ length: parts }, (_, i) => Math.max(0, Math.min(each, n - each * i)));
};
// the tokens of each part, piece by piece (pieces in order, each part's piece in turn)
function pieceByPiece(lengths: number[], bases: number[], pieces: number): number[] {
  const out: number[] = [];
  const starts = lengths.map(() => 0);
  for (let p = 0; p < pieces; p++) {
    lengths.forEach((n, k) => {
      const size = chunks(n, pieces)[p]!;
      for (let t = starts[k]!; t < starts[k]! + size; t++) out.push(bases[k]! + t, bases[k]! + t);
      starts[k]! += size;
    });
  }
  return out;
}

describe('joinShards and splitShards', () => {
  it('are cat and split on one device', async () => {
    const mesh = one();
    const [a, b] = [tokens(5, 0, mesh), tokens(12, 100, mesh)];
    const joined = dt.joinShards([a, b], 1);
    const cat = dt.cat([a, b], 1);
    expect(joined.shape).toEqual([1, 17, 2]);
    expect(await values(joined)).toEqual(await values(cat));
    const [a2, b2] = dt.splitShards(joined, [5, 12], -2) as [dt.Tensor, dt.Tensor];
    expect(await values(a2)).toEqual(await values(a));
    expect(await values(b2)).toEqual(await values(b));
    const alone = dt.joinShards([a], 1);
    expect(await values(alone)).toEqual(await values(a));
    dt.dispose([a, b, joined, cat, a2, b2, alone]);
  });

  it('are cat and split where the dim is not split (another dim is)', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1]);
    const split = [dt.Shard(2)];
    const [a, b] = dt.tidy(() => [tokens(5, 0, mesh).redistribute(split), tokens(12, 100, mesh).redistribute(split)]);
    const joined = dt.joinShards([a, b], 1);
    expect(joined.placements.map(String)).toEqual(['S(2)']);
    const cat = dt.tidy(() => dt.cat([tokens(5, 0, one()), tokens(12, 100, one())], 1));
    expect(await values(joined)).toEqual(await values(cat));
    const [a2, b2] = dt.splitShards(joined, [5, 12], 1) as [dt.Tensor, dt.Tensor];
    expect(await values(a2)).toEqual(await values(a));
    expect(await values(b2)).toEqual(await values(b));
    dt.dispose([a, b, joined, cat, a2, b2]);
  });

  const cases = [
    { name: '2 ranks, 5 + 12 tokens (3+6, 2+6)', mesh: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), lengths: [5, 12], split: [dt.Shard(1)], pieces: 2 },
    { name: '2 ranks, three parts 4 + 3 + 6 (2+2+3, 2+1+3)', mesh: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), lengths: [4, 3, 6], split: [dt.Shard(1)], pieces: 2 },
    { name: '4 ranks, 7 + 8 tokens (2+2, 2+2, 2+2, 1+2)', mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ring']), lengths: [7, 8], split: [dt.Shard(1)], pieces: 4 },
    { name: '4 ranks, 333 + 4096 tokens', mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ring']), lengths: [333, 4096], split: [dt.Shard(1)], pieces: 4 },
    { name: '8 ranks, 4096 + 333 tokens (SD3: image, then text)', mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3, 4, 5, 6, 7], ['ring']), lengths: [4096, 333], split: [dt.Shard(1)], pieces: 8 },
    { name: '2x2, split over both mesh dims, 7 + 8', mesh: () => dt.initDeviceMesh('cpu', [2, 2], ['ring', 'ulysses']), lengths: [7, 8], split: [dt.Shard(1), dt.Shard(1)], pieces: 4 },
    { name: '2x2, split over the second mesh dim, the last dim over the first', mesh: () => dt.initDeviceMesh('cpu', [2, 2], ['tp', 'ring']), lengths: [5, 12], split: [dt.Shard(2), dt.Shard(1)], pieces: 2 },
  ];
  it.each(cases)('$name: each rank keeps its pieces, the global order is piece by piece', async ({ mesh: make, lengths, split, pieces }) => {
    const mesh = make();
    const bases = lengths.map((_, k) => 10_000 * k);
    const parts = dt.tidy(() => lengths.map((n, k) => tokens(n, bases[k]!, mesh).redistribute(split)));
    const joined = dt.joinShards(parts, 1);
    const total = lengths.reduce((a, b) => a + b, 0);
    expect(joined.shape).toEqual([1, total, 2]);
    expect(joined.placements.map(String)).toEqual(split.map(String));
    // every rank's piece is its pieces of the parts, cat (nothing moved)
    for (let rank = 0; rank < mesh.size; rank++) {
      const [local, want] = dt.tidy(() => [joined.toLocal(rank), dt.cat(parts.map((p) => p.toLocal(rank)), 1)]);
      expect(await values(local), `rank ${rank}`).toEqual(await values(want));
      dt.dispose([local, want]);
    }
    // the global order: piece by piece, not cat's
    const got = await values(joined);
    expect(got).toEqual(pieceByPiece(lengths, bases, pieces));
    const cat = dt.tidy(() => dt.cat(lengths.map((n, k) => tokens(n, bases[k]!, one())), 1));
    expect(got, 'not torch.cat order').not.toEqual(await values(cat));
    const back = dt.splitShards(joined, lengths, 1);
    for (const [k, part] of back.entries()) {
      expect(part.shape).toEqual([1, lengths[k], 2]);
      expect(part.placements.map(String)).toEqual(split.map(String));
      expect(await values(part), `part ${k}`).toEqual(await values(parts[k]!));
    }
    dt.dispose([...parts, joined, cat, ...back]);
  });

  it('refuse lengths whose pieces do not add up to torch.chunk pieces, and parts placed differently', () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ring']);
    const [a, b, whole] = dt.tidy(() => [tokens(5, 0, mesh).redistribute([dt.Shard(1)]), tokens(8, 100, mesh).redistribute([dt.Shard(1)]), tokens(13, 0, mesh).redistribute([dt.Shard(1)])]);
    const before = dt.memory().numTensors;
    const refused = (fn: () => unknown, code: string, message: RegExp) => {
      let thrown: unknown;
      try {
        fn();
      } catch (err) {
        thrown = err;
      }
      expect(dt.isDTorchError(thrown), String(thrown)).toBe(true);
      expect((thrown as dt.DTorchError).code).toBe(code);
      expect((thrown as Error).message).toMatch(message);
    };
    refused(() => dt.joinShards([a, b], 1), 'SHAPE_MISMATCH', /join_shards: parts of lengths \[5, 8\] along dim 1, each in 4 pieces \(\[S\(1\)\]\), do not make a Shard\(1\) of length 13: rank 2 holds 1 \+ 2 = 3 but torch.chunk gives it 4; .*gather the parts/);
    refused(() => dt.splitShards(whole, [5, 8], 1), 'SHAPE_MISMATCH', /split_shards: parts of lengths \[5, 8\] .* rank 2 holds 1 \+ 2 = 3 but torch.chunk gives it 4; .*use split/);
    refused(() => dt.splitShards(whole, [5, 9], 1), 'SHAPE_MISMATCH', /add up to 14 but dim 1 has size 13/);
    const replicated = dt.tidy(() => tokens(8, 100, mesh));
    const after = dt.memory().numTensors;
    refused(() => dt.joinShards([a, replicated], 1), 'PLACEMENT_MISMATCH', /join_shards/);
    refused(() => dt.joinShards([a, 'b' as unknown as dt.Tensor], 1), 'INVALID_ARGUMENT', /joinShards tensors/);
    refused(() => dt.splitShards(whole, [5, 8], 3), 'INVALID_ARGUMENT', /splitShards: dim 3 is out of range/);
    expect(dt.memory().numTensors, 'nothing left behind').toBe(after);
    expect(after).toBe(before + 1);
    dt.dispose([a, b, whole, replicated]);
  });
});
