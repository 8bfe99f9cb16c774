// Context-parallel attention equals single-device attention (float32, <= 1e-5): Ulysses
// (all-to-all sequence <-> heads), true ring attention (key/value blocks passed around the ring,
// merged by log-sum-exp; causal and not; uneven blocks), and both on a 2-D mesh; and attention
// over heads packed in the last dim on meshes (below).
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

// Attention over heads packed in the last dim (scaledDotProductAttention's `heads`): q, k, v
// [B, L, heads·E] equal torch's sdpa over the [B, heads, L, E] views on one device (the fixture
// cases in tests/conformance), and here on meshes: split by batch or by queries (the engine's
// sdpa_heads rows), split on the packed dim, evenly between heads or not, and sequence-parallel
// over 'ulysses' or 'ring' (unpacked around sdpa), each equal to one device within 1e-5.
interface PackedCase {
  mesh: dt.DeviceMesh;
  placements: dt.Placement[];
  /** k's and v's, default q's */
  kvPlacements?: dt.Placement[];
  /** the mask's (of shape [B, 1, L, L]), default Replicate */
  maskPlacements?: dt.Placement[];
  heads: number;
  shape: [number, number, number]; // B, L, heads·E
  isCausal?: boolean;
  mask?: boolean;
}

async function checkPacked(c: PackedCase): Promise<void> {
  const make = (seed: number, mesh: dt.DeviceMesh, placements?: dt.Placement[]) => dt.randn(c.shape, { seed, mesh, placements });
  const [, L] = c.shape;
  const mask = c.mask ? dt.rand([c.shape[0], 1, L, L], { seed: 9, mesh: one }).gt(0.3).logicalOr(dt.eye(L)) : undefined;
  // the reference: sdpa over [B, heads, L, E] views on one device
  const split = (t: dt.Tensor) => t.unflatten(-1, [c.heads, -1]).transpose(1, 2);
  const expected = dt.F.scaledDotProductAttention(split(make(1, one)), split(make(2, one)), split(make(3, one)), { isCausal: c.isCausal, attnMask: mask })
    .transpose(1, 2)
    .flatten(2);
  const [q, k, v] = [1, 2, 3].map((s) => make(s, c.mesh, s === 1 ? c.placements : (c.kvPlacements ?? c.placements))) as [dt.Tensor, dt.Tensor, dt.Tensor];
  const maskHere = mask ? mask.redistribute(c.mesh, c.maskPlacements ?? c.mesh.shape.map(() => dt.Replicate())) : undefined;
  const out = dt.F.scaledDotProductAttention(q, k, v, { isCausal: c.isCausal, attnMask: maskHere, heads: c.heads });
  expect(out.shape).toEqual(c.shape);
  expect(await maxDiff(out, expected)).toBeLessThanOrEqual(1e-5);
}

describe('attention over packed heads', () => {
  it('records one op on one device, and 5 fewer than the views around sdpa', async () => {
    const [q, k, v] = [1, 2, 3].map((seed) => dt.randn([2, 5, 12], { seed, mesh: one }));
    const nodes = async (fn: () => dt.Tensor) => {
      await dt.sync();
      const before = dt.graph.stats().nodes;
      const out = fn();
      await dt.sync();
      const after = dt.graph.stats().nodes;
      return { out, nodes: after - before };
    };
    const packed = await nodes(() => dt.F.scaledDotProductAttention(q!, k!, v!, { heads: 3 }));
    const viewed = await nodes(() => dt.tidy(() => {
      const split = (t: dt.Tensor) => t.unflatten(-1, [3, -1]).transpose(1, 2);
      return dt.F.scaledDotProductAttention(split(q!), split(k!), split(v!)).transpose(1, 2).flatten(2);
    }));
    expect(viewed.nodes - packed.nodes).toBeGreaterThanOrEqual(5);
    expect(await maxDiff(packed.out, viewed.out)).toBe(0);
  });

  it('split by batch or by queries, causal, masked', async () => {
    for (const n of [2, 3]) {
      const mesh = new dt.DeviceMesh('cpu', Array.from({ length: n }, (_, i) => i));
      await checkPacked({ mesh, placements: [dt.Shard(0)], heads: 3, shape: [3, 5, 12] });
      await checkPacked({ mesh, placements: [dt.Shard(0)], heads: 2, shape: [2, 6, 8], isCausal: true });
      const queries = { placements: [dt.Shard(1)], kvPlacements: [dt.Replicate()] }; // against whole k and v
      await checkPacked({ mesh, ...queries, heads: 3, shape: [2, 7, 6] });
      await checkPacked({ mesh, ...queries, heads: 3, shape: [2, 7, 6], mask: true, maskPlacements: [dt.Shard(2)] });
    }
  });

  it('split on the packed dim, between heads and through them', async () => {
    const two = new dt.DeviceMesh('cpu', [0, 1]);
    await checkPacked({ mesh: two, placements: [dt.Shard(2)], heads: 4, shape: [2, 5, 16] }); // 2 heads each
    await checkPacked({ mesh: two, placements: [dt.Shard(2)], heads: 3, shape: [1, 4, 6], isCausal: true }); // a head split in two
    const four = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
    await checkPacked({ mesh: four, placements: [dt.Shard(2)], heads: 2, shape: [1, 3, 6], mask: true }); // chunks 2, 2, 2, 0
  });

  it("sequence-parallel over 'ulysses' and 'ring'", async () => {
    const ulysses = new dt.DeviceMesh('cpu', [0, 1], ['ulysses']);
    await checkPacked({ mesh: ulysses, placements: [dt.Shard(1)], heads: 4, shape: [1, 6, 8] });
    await checkPacked({ mesh: ulysses, placements: [dt.Shard(1)], heads: 2, shape: [2, 5, 8], isCausal: true });
    const ring = new dt.DeviceMesh('cpu', [0, 1, 2], ['ring']);
    await checkPacked({ mesh: ring, placements: [dt.Shard(1)], heads: 2, shape: [1, 7, 8], isCausal: true });
  });

  it('refuses a last dim that the heads do not divide, and heads that are not a positive integer', () => {
    const q = dt.randn([1, 4, 6], { seed: 1, mesh: one });
    const v = dt.randn([1, 4, 5], { seed: 2, mesh: one });
    expect(() => dt.F.scaledDotProductAttention(q, q, q, { heads: 4 })).toThrow(/sdpa: with heads 4, q Tensor\(shape=\[1, 4, 6\].*not a multiple of 4/);
    expect(() => dt.F.scaledDotProductAttention(q, q, v, { heads: 3 })).toThrow('v ');
    for (const heads of [0, 1.5, -2, '3']) {
      expect(() => dt.F.scaledDotProductAttention(q, q, q, { heads: heads as number })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    const mask = dt.ones([2, 4, 4], { mesh: one, dtype: 'bool' }); // [heads 2, L, S] against 3 heads
    expect(() => dt.F.scaledDotProductAttention(q, q, q, { heads: 3, attnMask: mask })).toThrow('shapes [1, 3, 4, 4] and [2, 4, 4] cannot be broadcast');
  });
});
