// A long loop of collectives must not grow: 300 iterations of gather, all-to-all, reduce and
// scatter inside tidy() leave the live tensors and every worker's bytes where they were (and,
// on GPUs, the CUDA allocator's count of bytes in tensors).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';

describe('a long loop of collectives', () => {
  for (const mc of meshCases) {
    it.skipIf(mc.skip !== false)(`keeps memory flat: ${mc.name}`, async () => {
      const mesh = mc.make();
      const spread = (p: dt.Placement) => mesh.shape.map((_, d) => (d === 0 ? p : dt.Replicate()));
      let x = dt.randn([6, 10], { seed: 1, mesh, placements: spread(dt.Shard(0)) });
      const step = () =>
        dt.tidy(() => {
          const full = x.redistribute(spread(dt.Replicate())); // all-gather
          const swapped = full.redistribute(spread(dt.Shard(1))).redistribute(spread(dt.Shard(0))); // slice, all-to-all
          const summed = swapped.mul(0.5).redistribute(spread(dt.Partial())).redistribute(spread(dt.Shard(0))); // reduce-scatter
          return summed.add(full.redistribute(spread(dt.Shard(0))).mul(0.5));
        });
      const gpu = mesh.deviceType === 'cuda' ? mesh.devices[0]! : -1;
      const settle = async () => {
        await dt.sync();
        return { js: dt.memory(), cuda: gpu >= 0 ? dt.cuda.memoryStats(gpu).allocatedBytes : 0 };
      };
      for (let i = 0; i < 20; i++) {
        const next = step();
        x.dispose();
        x = next;
        await null;
      }
      const before = await settle();
      for (let i = 0; i < 300; i++) {
        const next = step();
        x.dispose();
        x = next;
        if (i % 10 === 0) await null; // flush now and then, as a program does
      }
      const after = await settle();
      expect(after.js.numTensors).toBe(before.js.numTensors);
      expect(after.js.perDevice.map((d) => d.allocatedBytes)).toEqual(before.js.perDevice.map((d) => d.allocatedBytes));
      expect(after.cuda).toBe(before.cuda);
      // and the values still add up: x stays its first value (half of x plus half of x)
      const first = dt.randn([6, 10], { seed: 1, mesh });
      expect(Array.from((await x.data()) as Float32Array)).toEqual(Array.from((await first.data()) as Float32Array));
      dt.dispose([x, first]);
    });
  }
});
