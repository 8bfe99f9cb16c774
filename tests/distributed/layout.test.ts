// Uneven shards follow torch.chunk, nested mesh dims split in mesh-dim order, and the table
// of visualizeSharding says who holds what.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

// torch.chunk sizes, written out independently of the engine
function chunkSizes(size: number, parts: number): number[] {
  const each = Math.ceil(size / parts);
  return Array.from({ length: parts }, (_, i) => Math.max(0, Math.min(each, size - each * i)));
}

describe('layout', () => {
  const four = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);

  it('uses torch.chunk sizes for uneven shards, empty pieces included', () => {
    expect(dt.zeros([11], { mesh: four, placements: [dt.Shard(0)] }).localShapes()).toEqual([[3], [3], [3], [2]]);
    expect(dt.zeros([2, 5], { mesh: four, placements: [dt.Shard(0)] }).localShapes()).toEqual([[1, 5], [1, 5], [0, 5], [0, 5]]);
    expect(dt.zeros([5], { mesh: four, placements: [dt.Shard(-1)] }).localShapes()).toEqual([[2], [2], [1], [0]]);
    for (const size of [0, 1, 3, 4, 7, 9, 13]) {
      const t = dt.zeros([size], { mesh: four, placements: [dt.Shard(0)] });
      expect(t.localShapes().map((s) => s[0])).toEqual(chunkSizes(size, 4));
      expect(t.localShape(3)).toEqual([chunkSizes(size, 4)[3]]);
    }
  });

  it('nests mesh dims that shard the same tensor dim', () => {
    const grid = dt.initDeviceMesh('cpu', [2, 2]);
    const t = dt.zeros([11], { mesh: grid, placements: [dt.Shard(0), dt.Shard(0)] });
    // 11 -> 6 | 5, then 6 -> 3 | 3 and 5 -> 3 | 2
    expect(t.localShapes()).toEqual([[3], [3], [3], [2]]);
  });

  it('keeps only its piece on each rank, and reads gather them in order', async () => {
    const data = Array.from({ length: 22 }, (_, i) => i);
    const t = dt.tensor(data, { shape: [11, 2], mesh: four, placements: [dt.Shard(0)] });
    expect(await t.toLocal(3).array()).toEqual([[18, 19], [20, 21]]);
    expect(String(t.toLocal(3).mesh)).toBe("DeviceMesh('cpu', [3])");
    expect(Array.from((await t.data()) as Float32Array)).toEqual(data);
    const perDevice = dt.memory().perDevice.filter((d) => d.device !== 'cpu:0');
    expect(perDevice.length).toBeGreaterThan(0);
  });

  it('reads gather each piece once onto rank 0, not the whole tensor onto every rank', async () => {
    const n = 1 << 18; // 1 MiB of float32
    const device = (name: string) => dt.memory().perDevice.find((d) => d.device === name)!;
    for (const placements of [[dt.Shard(0)], [dt.Partial()]]) {
      const x = dt.ones([n], { mesh: four, placements });
      await dt.sync();
      dt.resetPeakMemory();
      const [base0, base1] = [device('cpu:0').allocatedBytes, device('cpu:1').allocatedBytes];
      expect(Array.from((await x.data()) as Float32Array).every((v) => v === 1)).toBe(true);
      expect(device('cpu:0').peakBytes - base0).toBeGreaterThanOrEqual(4 * n); // assembled there
      expect(device('cpu:1').peakBytes - base1).toBe(0); // an all-gather would put 4 MiB here too
      x.dispose();
    }
  });

  it('prints a sharding table', () => {
    const grid = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']);
    const t = dt.zeros([5, 3], { mesh: grid, placements: [dt.Shard(0), dt.Shard(1)] });
    expect(dt.visualizeSharding(t)).toBe(
      [
        "Tensor(shape=[5, 3], dtype=float32, placements=[S(0), S(1)]) on DeviceMesh('cpu', [0, 1, 2, 3], ['dp', 'tp']) shape=[2, 2]",
        'rank  device  dim 0   dim 1',
        '0     cpu:0   [0, 3)  [0, 2)',
        '1     cpu:1   [0, 3)  [2, 3)',
        '2     cpu:2   [3, 5)  [0, 2)',
        '3     cpu:3   [3, 5)  [2, 3)',
      ].join('\n'),
    );
    const p = dt.zeros([2], { mesh: four, placements: [dt.Partial()] });
    expect(dt.visualizeSharding(p)).toContain('partial P(sum)');
  });

  it('checks placements: one per mesh dim, shard dims inside the tensor', () => {
    expect(() => dt.zeros([3], { mesh: four, placements: [dt.Shard(1)] })).toThrow(
      'zeros: Shard(dim=1) does not fit a 1-d tensor; shard a dim in [-1, 1)',
    );
    expect(() => dt.zeros([3], { mesh: four, placements: [] })).toThrow('zeros: got 0 placement(s) for a 1-d mesh');
    expect(() => dt.zeros([3], { mesh: four }).redistribute([dt.Shard(2)])).toThrow('redistribute: Shard(dim=2) does not fit');
  });
});

describe('DeviceMesh on N dims', () => {
  it('gives sub-meshes by dim name and builds meshes from a shape', () => {
    const mesh = dt.initDeviceMesh('cpu', [2, 3], ['dp', 'tp']);
    expect(mesh.shape).toEqual([2, 3]);
    expect(mesh.devices).toEqual([0, 1, 2, 3, 4, 5]);
    expect(mesh.get('tp').map((m) => m.devices)).toEqual([[0, 1, 2], [3, 4, 5]]);
    expect(mesh.get('dp').map((m) => m.devices)).toEqual([[0, 3], [1, 4], [2, 5]]);
    expect(mesh.get('dp')[0]!.dimNames).toEqual(['dp']);
    expect(mesh.coordinates(4)).toEqual([1, 1]);
    expect(() => mesh.get('pp')).toThrow(`mesh dim "pp" is not a dim of ${mesh}: 'dp', 'tp'`);
  });

  it('names devices that do not exist', () => {
    expect(() => new dt.DeviceMesh('cpu', [0, 4096])).toThrow(/cpu device 4096 does not exist: this process has cpu devices 0\.\.\d+/);
  });
});

describe('redistribute plans', () => {
  const four = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
  const grid = dt.initDeviceMesh('cpu', [2, 2]);
  const plan = (mesh: dt.DeviceMesh, from: dt.Placement[], to: dt.Placement[]) =>
    dt.explainRedistribute(dt.zeros([8, 8], { mesh, placements: from }), to);

  it('use one collective per mesh dim where one suffices', () => {
    expect(plan(four, [dt.Partial()], [dt.Shard(1)])).toEqual(['reduce-scatter P(sum)->S(1) on mesh dim 0']);
    expect(plan(four, [dt.Shard(0)], [dt.Shard(1)])).toEqual(['all-to-all S(0)->S(1) on mesh dim 0']);
    expect(plan(four, [dt.Shard(0)], [dt.Replicate()])).toEqual(['all-gather S(0)->R on mesh dim 0']);
    expect(plan(four, [dt.Replicate()], [dt.Shard(1)])).toEqual(['local slice R->S(1) on mesh dim 0']);
    expect(plan(four, [dt.Shard(0)], [dt.Partial()])).toEqual(['local pad S(0)->P(sum) on mesh dim 0']);
    expect(plan(four, [dt.Shard(0)], [dt.Shard(0)])).toEqual([]);
    expect(plan(grid, [dt.Shard(0), dt.Shard(1)], [dt.Shard(1), dt.Shard(0)])).toEqual([
      'all-gather S(1)->R on mesh dim 1',
      'all-to-all S(0)->S(1) on mesh dim 0',
      'local slice R->S(0) on mesh dim 1',
    ]);
  });

  it('take nested shards apart innermost first', () => {
    expect(plan(grid, [dt.Shard(0), dt.Shard(0)], [dt.Replicate(), dt.Shard(0)])).toEqual([
      'all-gather S(0)->R on mesh dim 1',
      'all-gather S(0)->R on mesh dim 0',
      'local slice R->S(0) on mesh dim 1',
    ]);
    expect(plan(grid, [dt.Partial(), dt.Shard(0)], [dt.Shard(0), dt.Shard(0)])).toEqual([
      'all-gather S(0)->R on mesh dim 1',
      'reduce-scatter P(sum)->S(0) on mesh dim 0',
      'local slice R->S(0) on mesh dim 1',
    ]);
  });
});
