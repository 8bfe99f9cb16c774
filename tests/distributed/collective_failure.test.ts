// A collective whose participants did not all get there: one rank's input failed upstream (its
// piece could not be allocated) while the other's piece is empty and fine. Every participant
// must fail with the upstream error (on GPUs: before any NCCL call is launched, so no GPU waits
// for a peer that never comes), and the mesh must keep working afterwards.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';

describe('collectives after a failure on one rank', () => {
  for (const mc of meshCases) {
    it.skipIf(mc.skip !== false)(`fail on every rank and leave the mesh usable: ${mc.name}`, async () => {
      const mesh = mc.make();
      if (mesh.size < 2) return;
      // torch.chunk of 1 row over the mesh: rank 0 holds the row (2^53 floats: no device has
      // 32 PiB), every other rank an empty piece
      const x = dt.empty([1, 2 ** 53], { mesh, placements: mesh.shape.map((_, d) => (d === 0 ? dt.Shard(0) : dt.Replicate())) });
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
  }
});
