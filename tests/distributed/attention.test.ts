// Context-parallel attention equals single-device attention (float32, <= 1e-5): Ulysses
// (all-to-all sequence <-> heads), true ring attention (key/value blocks passed around the ring,
// merged by log-sum-exp; causal and not; uneven blocks), and both on a 2-D mesh.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const one = new dt.DeviceMesh('cpu', [0]);

async function maxDiff(a: dt.Tensor, b: dt.Tensor): Promise<number> {
  const [x, y] = [(await a.data()) as Float32Array, (await b.data()) as Float32Array];
  expect(x.length).toBe(y.length);
  return Math.max(0, ...Array.from(x, (v, i) => Math.abs(v - y[i]!)));
}

interface Case {
  mesh: dt.DeviceMesh;
  placements: dt.Placement[];
  shape: [number, number, number, number]; // B, H, S, E
  isCausal?: boolean;
  scale?: number;
  mask?: boolean;
}

async function check(c: Case): Promise<void> {
  const make = (seed: number, mesh: dt.DeviceMesh, placements?: dt.Placement[]) => dt.randn(c.shape, { seed, mesh, placements });
  const [S] = [c.shape[2]];
  const mask = c.mask ? dt.rand([S, S], { seed: 9, mesh: one }).gt(0.3).logicalOr(dt.eye(S)) : undefined;
  const options = { isCausal: c.isCausal, scale: c.scale };
  const expected = dt.F.scaledDotProductAttention(make(1, one), make(2, one), make(3, one), { ...options, attnMask: mask });
  const [q, k, v] = [1, 2, 3].map((s) => make(s, c.mesh, c.placements)) as [dt.Tensor, dt.Tensor, dt.Tensor];
  const maskHere = mask ? mask.redistribute(c.mesh, c.mesh.shape.map(() => dt.Replicate())) : undefined;
  const out = dt.F.scaledDotProductAttention(q, k, v, { ...options, attnMask: maskHere });
  expect(out.placements.map(String)).toEqual(c.placements.map(String)); // stays sharded on the sequence
  expect(await maxDiff(out, expected)).toBeLessThanOrEqual(1e-5);
}

describe('context-parallel attention', () => {
  it('Ulysses: all-to-all sequence <-> heads, with and without causal or a mask', async () => {
    for (const n of [2, 3]) {
      const mesh = new dt.DeviceMesh('cpu', Array.from({ length: n }, (_, i) => i), ['ulysses']);
      await check({ mesh, placements: [dt.Shard(2)], shape: [2, 4, 7, 8] });
      await check({ mesh, placements: [dt.Shard(2)], shape: [1, 3, 6, 4], isCausal: true });
      await check({ mesh, placements: [dt.Shard(2)], shape: [1, 6, 5, 4], mask: true });
    }
  });

  it('ring: key/value blocks passed around the ring, causal and not, uneven blocks', async () => {
    for (const n of [2, 3, 4]) {
      const mesh = new dt.DeviceMesh('cpu', Array.from({ length: n }, (_, i) => i), ['ring']);
      await check({ mesh, placements: [dt.Shard(2)], shape: [2, 2, 8, 4] });
      await check({ mesh, placements: [dt.Shard(2)], shape: [1, 2, 7, 4], isCausal: true });
      await check({ mesh, placements: [dt.Shard(2)], shape: [1, 1, 5, 3], isCausal: true, scale: 0.7 });
      await check({ mesh, placements: [dt.Shard(2)], shape: [1, 2, 3, 4] }); // fewer rows than ranks: empty blocks
    }
  });

  it('ring x Ulysses on a 2-D mesh', async () => {
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['ring', 'ulysses']);
    await check({ mesh, placements: [dt.Shard(2), dt.Shard(2)], shape: [1, 4, 9, 4] });
    await check({ mesh, placements: [dt.Shard(2), dt.Shard(2)], shape: [2, 2, 8, 4], isCausal: true });
    const wide = dt.initDeviceMesh('cpu', [3, 2], ['ring', 'ulysses']);
    await check({ mesh: wide, placements: [dt.Shard(2), dt.Shard(2)], shape: [1, 4, 10, 2], isCausal: true });
  });

  it('refuses q, k and v placed differently, and masks with ring attention', () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['ring']);
    const q = dt.randn([1, 1, 4, 2], { seed: 1, mesh, placements: [dt.Shard(2)] });
    const r = dt.randn([1, 1, 4, 2], { seed: 1, mesh });
    expect(() => dt.F.scaledDotProductAttention(q, r, q)).toThrow('context parallel attention needs q, k and v placed alike');
    expect(() => dt.F.scaledDotProductAttention(q, q, q, { attnMask: dt.ones([4, 4], { mesh, dtype: 'bool' }) })).toThrow(
      'ring attention takes isCausal but not attnMask',
    );
  });
});
