// A collective whose participants did not all get there: one rank's input failed upstream (its
// piece could not be allocated) while the other's piece is empty and fine. Every participant
// must fail with the upstream error (on GPUs: before any NCCL call is launched, so no GPU waits
// for a peer that never comes), and the mesh must keep working afterwards.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';

// a collective needs two ranks: the 1-device meshes are left out here, not returned from early
const multi = meshCases.filter((mc) => mc.devices >= 2);

describe('collectives after a failure on one rank', () => {
  it('runs on every mesh of two or more devices', () => {
    expect(multi.map((mc) => mc.name.split(' (')[0])).toEqual(['cpu x2', 'cpu x3', 'cpu 2x2', 'cuda x2']);
  });

  for (const mc of multi) {
    it.skipIf(mc.skip !== false)(`fail on every rank and leave the mesh usable: ${mc.name}`, async () => {
      const mesh = mc.make();
      expect(mesh.size).toBe(mc.devices);
      // torch.chunk of 1 row over the mesh: rank 0 holds the row (2^50 floats: no device has
      // 4 PiB), every other rank an empty piece
      const x = dt.empty([1, 2 ** 50], { mesh, placements: mesh.shape.map((_, d) => (d === 0 ? dt.Shard(0) : dt.Replicate())) });
      const gathered = x.redistribute(mesh.shape.map(() => dt.Replicate()));
      const first = gathered.narrow(1, 0, 4);
      const rejection = await first.data().catch((e: unknown) => e);
      expect(rejection).toBeInstanceOf(dt.DTorchError);
      expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
      expect((rejection as Error).message).toMatch(/empty/);
      dt.dispose([x, gathered, first]);
      // the same kind of collective again, healthy this time
      const y = dt.arange(0, 6, 1, { mesh, dtype: 'float32' }).redistribute(mesh.shape.map((_, d) => (d === 0 ? dt.Shard(0) : dt.Replicate())));
      expect(Array.from((await y.redistribute(mesh.shape.map(() => dt.Replicate())).data()) as Float32Array)).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it.skipIf(mc.skip !== false)(`a linear with the all-gather inside fails on every rank too: ${mc.name}`, async () => {
      const mesh = mc.make();
      expect(mesh.size).toBe(mc.devices);
      const onDim0 = (p: dt.Placement) => mesh.shape.map((_, d) => (d === 0 ? p : dt.Replicate()));
      // rank 0's token piece failed upstream (as above); the others' are empty and fine
      const huge = dt.empty([1, 2 ** 50], { mesh, placements: onDim0(dt.Shard(0)) });
      const x = huge.narrow(1, 0, 4);
      const w = dt.ones([3, 4], { mesh, placements: onDim0(dt.Shard(0)) });
      const [y] = dt.F.allGatherLinear(x, [w], [], { meshDim: 0 });
      const rejection = await y!.data().catch((e: unknown) => e);
      expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
      expect((rejection as Error).message).toMatch(/empty/);
      const fine = dt.ones([2, 4], { mesh, placements: onDim0(dt.Shard(0)) });
      const [z] = dt.F.allGatherLinear(fine, [w], [], { meshDim: 0 });
      expect(Array.from((await z!.data()) as Float32Array)).toEqual(new Array(6).fill(4));
      dt.dispose([huge, x, w, y!, fine, z!]);
    });
  }
});
