// reshape keeps a shard through a split or merge of dims where the shard's pieces divide the
// outer size: the pieces are those of the mesh dims that shard that tensor dim, not of the whole
// mesh (a [2,12,16] tensor sharded 2 ways on a 2x2 mesh splits its 16 into [2, 8] in place).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const full = () => dt.arange(0, 2 * 12 * 16, 1, { mesh: new dt.DeviceMesh('cpu', [0]) }).reshape([2, 12, 16]);

describe('reshape rows on a 2x2 mesh', () => {
  const mesh = dt.initDeviceMesh('cpu', [2, 2]);
  const cases: { placements: dt.Placement[]; to: number[]; expected: string[] }[] = [
    { placements: [dt.Shard(2), dt.Replicate()], to: [2, 12, 2, 8], expected: ['S(2)', 'R'] },
    { placements: [dt.Replicate(), dt.Shard(2)], to: [2, 12, 2, 8], expected: ['R', 'S(2)'] },
    { placements: [dt.Shard(0), dt.Replicate()], to: [24, 16], expected: ['S(0)', 'R'] }, // a merge: 2 outer rows in 2 pieces
  ];
  for (const c of cases) {
    it(`[${c.placements.map(String)}] reshape to [${c.to}] stays sharded and equals one device`, async () => {
      const x = dt.tidy(() => full().redistribute(mesh, c.placements));
      const y = x.reshape(c.to);
      expect(y.placements.map(String)).toEqual(c.expected);
      expect(Array.from((await y.data()) as Float32Array)).toEqual(Array.from((await full().reshape(c.to).data()) as Float32Array));
      dt.dispose([x, y]);
    });
  }

  it('refuses a split whose first size the pieces do not divide, naming the rows', () => {
    const x = dt.tidy(() => full().redistribute(mesh, [dt.Shard(2), dt.Shard(2)])); // 16 in 4 pieces; [2, 8] has 2 outer
    expect(() => x.reshape([2, 12, 2, 8])).toThrow(/match no signature row/);
    x.dispose();
  });
});
