// Ops of any arity: the arguments and the output metadata of a record cross the binding through
// two shared buffers (`args`, `out`), and no size of theirs may reach the user. Ops with many
// outputs (unbind, split, chunk past ~500 pieces) and many inputs or attributes (cat of 70,000
// tensors, a 70,000-d shape) work as in PyTorch, and a call that fails records nothing.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

const live = () => dt.memory().numTensors;

describe('binding buffers', () => {
  it('unbind of 1,000 and 10,000 rows gives every row, as torch.unbind', async () => {
    for (const rows of [1000, 10_000]) {
      const x = dt.tidy(() => dt.arange(0, rows * 3, 1, { dtype: 'int32' }).reshape([rows, 3]));
      const before = live();
      const pieces = x.unbind(0);
      expect(pieces).toHaveLength(rows);
      expect(live()).toBe(before + rows);
      for (const r of [0, 1, rows - 2, rows - 1]) {
        expect(pieces[r]!.shape).toEqual([3]);
        expect(Array.from((await pieces[r]!.data()) as Int32Array)).toEqual([3 * r, 3 * r + 1, 3 * r + 2]);
      }
      dt.dispose([x, ...pieces]);
    }
  });

  it('split and chunk into 10,000 pieces, uneven last piece included', async () => {
    const x = dt.arange(0, 20_001, 1, { dtype: 'float32' });
    const split = x.split(2, 0);
    expect(split).toHaveLength(10_001);
    expect(split[10_000]!.shape).toEqual([1]);
    expect(Array.from((await split[9_999]!.data()) as Float32Array)).toEqual([19_998, 19_999]);
    expect(Array.from((await split[10_000]!.data()) as Float32Array)).toEqual([20_000]);
    const chunks = x.chunk(10_001, 0);
    expect(chunks.map((c) => c.shape[0]!).reduce((a, b) => a + b, 0)).toBe(20_001);
    expect(Array.from((await chunks[chunks.length - 1]!.data()) as Float32Array)).toEqual([20_000]);
    dt.dispose([x, ...split, ...chunks]);
  });

  it('many outputs on a sharded mesh keep their placements', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1]);
    const x = dt.tidy(() => dt.arange(0, 2 * 1000, 1, { mesh, dtype: 'float32' }).reshape([2, 1000]).redistribute([dt.Shard(0)]));
    const columns = x.unbind(1);
    expect(columns).toHaveLength(1000);
    expect(columns[999]!.placements).toEqual([dt.Shard(0)]);
    expect(Array.from((await columns[999]!.data()) as Float32Array)).toEqual([999, 1999]);
    dt.dispose([x, ...columns]);
  });

  it('after an op grew the out buffer, ordinary ops still read their outputs from it', async () => {
    const z = dt.zeros([5000, 1]);
    const pieces = z.unbind(0);
    const y = dt.full([2, 3], 7, { dtype: 'int64' });
    expect(y.shape).toEqual([2, 3]);
    expect(y.dtype).toBe('int64');
    expect(Array.from((await y.data()) as BigInt64Array)).toEqual(new Array(6).fill(7n));
    dt.dispose([z, y, ...pieces]);
  });

  it('cat and stack of 70,000 tensors (more inputs than the first args buffer holds)', async () => {
    const parts = Array.from({ length: 70_000 }, (_, i) => dt.full([1], i % 1000, { dtype: 'int32' }));
    const before = live();
    const c = dt.cat(parts);
    expect(c.shape).toEqual([70_000]);
    const values = (await c.data()) as Int32Array;
    expect(values[0]).toBe(0);
    expect(values[69_999]).toBe(999);
    expect(values[12_345]).toBe(345);
    const s = dt.stack(parts.slice(0, 66_000));
    expect(s.shape).toEqual([66_000, 1]);
    expect(live()).toBe(before + 2);
    dt.dispose([c, s, ...parts]);
  });

  it('100-d and 70,000-d reshapes, and a 70,000-d shape whose header was written before the buffer grew', async () => {
    const x = dt.tidy(() => dt.ones([1]).reshape(new Array(100).fill(1)));
    expect(x.shape).toHaveLength(100);
    const y = x.add(1);
    expect(Array.from((await y.data()) as Float32Array)).toEqual([2]);
    const deep = x.reshape(new Array(70_000).fill(1)); // 70,000 attributes
    expect(deep.ndim).toBe(70_000);
    expect(Array.from((await deep.data()) as Float32Array)).toEqual([1]);
    deep.dispose();
    const mesh = new dt.DeviceMesh('cpu', [0, 1]);
    const wide = dt.full(new Array(70_000).fill(1), 3, { dtype: 'int32', mesh });
    expect(wide.ndim).toBe(70_000);
    expect(wide.dtype).toBe('int32'); // the creation header (mesh, placements, dtype) survived the growth
    expect(wide.mesh).toBe(mesh);
    expect(Array.from((await wide.data()) as Int32Array)).toEqual([3]);
    dt.dispose([x, y, wide]);
  });

  it('a many-output call that throws records nothing', () => {
    const x = dt.zeros([1000, 2]);
    const before = live();
    expect(() => x.unbind(2)).toThrow(dt.DTorchError);
    expect(() => x.split(0, 0)).toThrow(dt.DTorchError);
    expect(live()).toBe(before);
    x.dispose();
  });

  it('the engine refuses an args count past its buffer before recording (writes would have been lost)', () => {
    const e = engine();
    const before = live();
    const code = e.opCode('cat');
    expect(() => e.record(code, e.args.length + 1, 1)).toThrow(/args buffer holds/);
    expect(live()).toBe(before);
  });
});
