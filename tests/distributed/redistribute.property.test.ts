// Property suite: every redistribute, on meshes of 1, 2, 3, 4, 2x2 and 2x3 CPU devices, between
// random placements (nested shards, uneven and empty pieces, every Partial), returns exactly
// the values it was given, there and back again; so do creation and reads. Random tensors are
// the same on every mesh and placements as on one device.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { Gen, describeCase, numel, propertyMeshes, propertySeed } from './random.js';

const meshes = propertyMeshes();

// The same layout as `mesh` on devices `by` further on (nested like the original).
function shifted(mesh: dt.DeviceMesh, by: number): dt.DeviceMesh {
  const devices = mesh.devices.map((d) => d + by);
  const nested = mesh.ndim === 1 ? devices : Array.from({ length: mesh.shape[0]! }, (_, r) => devices.slice(r * mesh.shape[1]!, (r + 1) * mesh.shape[1]!));
  return new dt.DeviceMesh('cpu', nested, mesh.dimNames);
}

describe('redistribute (property)', () => {
  it('round-trips exactly between random placements: 300 cases', async () => {
    const g = new Gen(propertySeed);
    for (let i = 0; i < 300; i++) {
      const mesh = g.pick(meshes);
      const shape = g.shape(0, 3);
      const from = g.placements(mesh, shape.length);
      const to = g.placements(mesh, shape.length);
      const what = `shape [${shape}] on ${mesh}: ${dt.formatPlacements(from)} -> ${dt.formatPlacements(to)}`;
      const values = g.values(numel(shape));
      const x = dt.tensor(values, { shape, mesh, placements: from });
      const y = x.redistribute(to);
      const back = y.redistribute(from);
      expect(y.placements.map(String), describeCase(propertySeed, i, what)).toEqual(to.map(String));
      for (const t of [x, y, back]) {
        expect(Array.from((await t.data()) as Float32Array), describeCase(propertySeed, i, what)).toEqual(values);
      }
      dt.dispose([x, y, back]);
    }
  });

  it('moves between meshes: 40 cases', async () => {
    const g = new Gen(propertySeed + 1);
    for (let i = 0; i < 40; i++) {
      const [a, b] = [g.pick(meshes), g.pick(meshes)];
      // CPU: the same layout on other devices; CUDA: the other meshes of the GPUs present
      const target = b.deviceType === 'cpu' ? shifted(b, 8) : b;
      const shape = g.shape(1, 3);
      const values = g.values(numel(shape));
      const x = dt.tensor(values, { shape, mesh: a, placements: g.placements(a, shape.length) });
      const to = g.placements(target, shape.length);
      const y = x.redistribute(target, to);
      const what = `shape [${shape}] ${a} ${dt.formatPlacements(x.placements)} -> ${target} ${dt.formatPlacements(to)}`;
      expect(y.mesh, what).toBe(target);
      expect(Array.from((await y.data()) as Float32Array), describeCase(propertySeed + 1, i, what)).toEqual(values);
      dt.dispose([x, y]);
    }
  });

  it('draws the same random tensors on any mesh and placements as on one device: 60 cases', async () => {
    const g = new Gen(propertySeed + 2);
    const one = meshes[0]!;
    for (let i = 0; i < 60; i++) {
      const mesh = g.pick(meshes);
      const shape = g.shape(1, 3);
      const seed = g.int(0, 1_000_000);
      const op = g.pick(['rand', 'randn', 'randint'] as const);
      const make = (m: dt.DeviceMesh, placements?: dt.Placement[]) =>
        op === 'randint' ? dt.randint(-5, 5, shape, { seed, mesh: m, placements }) : dt[op](shape, { seed, mesh: m, placements });
      const placements = g.placements(mesh, shape.length, []);
      const [reference, sharded] = [make(one), make(mesh, placements)];
      const what = `${op}([${shape}], seed ${seed}) on ${mesh} ${dt.formatPlacements(placements)}`;
      expect(await sharded.data(), describeCase(propertySeed + 2, i, what)).toEqual(await reference.data());
      dt.dispose([reference, sharded]);
    }
  });

  it.skipIf(meshes[3]?.size !== 4)('plans P->S as a reduce-scatter and S(i)->S(j) as an all-to-all: each rank ends with only its piece', async () => {
    const mesh = meshes[3]!;
    const values = Array.from({ length: 40 }, (_, i) => i);
    const partial = dt.tensor(values, { shape: [8, 5], mesh, placements: [dt.Partial()] });
    const scattered = partial.redistribute([dt.Shard(1)]);
    expect(scattered.localShapes()).toEqual([[8, 2], [8, 2], [8, 1], [8, 0]]);
    expect(await scattered.toLocal(2).array()).toEqual(values.filter((_, i) => i % 5 === 4).map((v) => [v]));
    const swapped = scattered.redistribute([dt.Shard(0)]);
    expect(swapped.localShapes()).toEqual([[2, 5], [2, 5], [2, 5], [2, 5]]);
    expect(await swapped.toLocal(1).array()).toEqual([values.slice(10, 15), values.slice(15, 20)]);
  });
});
