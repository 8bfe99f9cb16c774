// allGatherLinear and linearReduceScatter (the tensor-parallel collective inside the linears)
// equal the same linears on one device (float32, <= 1e-5 relative, absolute below 1; measured on
// CPU meshes: 6e-7 for one linear, 8e-7 after 20 chained blocks), on every mesh kind: 1-D
// meshes of 1, 2 and 3 devices (uneven token and feature chunks), a 2x2 dp x tp mesh, and GPUs
// when present.
// Bad placements and shapes are refused with the fix named.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';

const one = new dt.DeviceMesh('cpu', [0]);

// The largest error relative to the value (absolute where the value is below 1).
async function maxDiff(a: dt.Tensor, b: dt.Tensor): Promise<number> {
  expect(a.shape).toEqual(b.shape);
  const [x, y] = [(await a.data()) as Float32Array, (await b.data()) as Float32Array];
  expect(x.length).toBe(y.length);
  return Math.max(0, ...Array.from(x, (v, i) => Math.abs(v - y[i]!) / Math.max(1, Math.abs(y[i]!))));
}

// The mesh dim of the collective is the last (tp); a leading mesh dim (dp) shards the batch.
function layout(mesh: dt.DeviceMesh) {
  const tp = mesh.ndim - 1;
  const on = (p: dt.Placement, dp: dt.Placement = dt.Replicate()) => mesh.shape.map((_, d) => (d === tp ? p : dp));
  return { tp, on };
}

describe('linears with the tensor-parallel collective inside', () => {
  for (const mc of meshCases) {
    it.skipIf(mc.skip !== false)(`allGatherLinear equals gather + linear on one device: ${mc.name}`, async () => {
      const mesh = mc.make();
      const { tp, on } = layout(mesh);
      const make = (shape: number[], seed: number, m: dt.DeviceMesh, placements?: dt.Placement[]) => dt.randn(shape, { seed, mesh: m, placements });
      // 7 tokens and 5 features of W2: uneven over 2 and 3 ranks
      const shapes = {
        x: [2, 7, 8],
        w1: [6, 8],
        w2: [5, 8],
        w3: [4, 8],
        b1: [6],
        b3: [4],
      };
      const x = make(shapes.x, 1, mesh, on(dt.Shard(1), dt.Shard(0)));
      const [w1, w2, w3] = [make(shapes.w1, 2, mesh, on(dt.Shard(0))), make(shapes.w2, 3, mesh, on(dt.Shard(0))), make(shapes.w3, 4, mesh)];
      const [b1, b3] = [make(shapes.b1, 5, mesh, on(dt.Shard(0))), make(shapes.b3, 6, mesh)];
      const ys = dt.F.allGatherLinear(x, [w1, w2, w3], [b1, undefined, b3], {
        meshDim: tp,
      });
      expect(ys.map((y) => y.placements[tp]!.toString())).toEqual(['S(2)', 'S(2)', 'R']);
      expect(ys.map((y) => y.shape)).toEqual([
        [2, 7, 6],
        [2, 7, 5],
        [2, 7, 4],
      ]);
      const x1 = make(shapes.x, 1, one);
      const expected = [
        dt.F.linear(x1, make(shapes.w1, 2, one), make(shapes.b1, 5, one)),
        dt.F.linear(x1, make(shapes.w2, 3, one)),
        dt.F.linear(x1, make(shapes.w3, 4, one), make(shapes.b3, 6, one)),
      ];
      for (let i = 0; i < 3; i++) expect(await maxDiff(ys[i]!, expected[i]!)).toBeLessThanOrEqual(1e-5);
    });

    it.skipIf(mc.skip !== false)(`linearReduceScatter equals linears + sum + scatter on one device: ${mc.name}`, async () => {
      const mesh = mc.make();
      const { tp, on } = layout(mesh);
      const make = (shape: number[], seed: number, m: dt.DeviceMesh, placements?: dt.Placement[]) => dt.randn(shape, { seed, mesh: m, placements });
      const shapes = {
        a: [2, 7, 6],
        b: [2, 7, 10],
        wa: [8, 6],
        wb: [8, 10],
        bias: [8],
      };
      const a = make(shapes.a, 1, mesh, on(dt.Shard(2), dt.Shard(0)));
      const b = make(shapes.b, 2, mesh, on(dt.Shard(2), dt.Shard(0)));
      const [wa, wb] = [make(shapes.wa, 3, mesh, on(dt.Shard(1))), make(shapes.wb, 4, mesh, on(dt.Shard(1)))];
      const y = dt.F.linearReduceScatter([a, b], [wa, wb], {
        dim: 1,
        bias: make(shapes.bias, 5, mesh),
        meshDim: tp,
      });
      expect(y.placements.map(String)).toEqual(on(dt.Shard(1), dt.Shard(0)).map(String));
      expect(y.shape).toEqual([2, 7, 8]);
      const expected = dt.F.linear(make(shapes.a, 1, one), make(shapes.wa, 3, one))
        .add(dt.F.linear(make(shapes.b, 2, one), make(shapes.wb, 4, one)))
        .add(make(shapes.bias, 5, one));
      expect(await maxDiff(y, expected)).toBeLessThanOrEqual(1e-5);
      // without a bias, scattering the last token-like dim of a 2-D input
      const flat = make([9, 6], 6, mesh, on(dt.Shard(1)));
      const z = dt.F.linearReduceScatter([flat], [wa], {
        dim: 0,
        meshDim: tp,
      });
      expect(await maxDiff(z, dt.F.linear(make([9, 6], 6, one), make(shapes.wa, 3, one)))).toBeLessThanOrEqual(1e-5);
    });

    it.skipIf(mc.skip !== false)(`a sequence-parallel MLP block in a loop: ${mc.name}`, async () => {
      const mesh = mc.make();
      const { tp, on } = layout(mesh);
      const make = (shape: number[], seed: number, m: dt.DeviceMesh, placements?: dt.Placement[]) =>
        dt.randn(shape, { seed, mesh: m, placements }).mul(0.3);
      const block = (x: dt.Tensor, w: dt.Tensor[]) =>
        dt.tidy(() => {
          const [h] = dt.F.allGatherLinear(dt.F.layerNorm(x, [8]), [w[0]!], [w[1]!], { meshDim: tp });
          return x.add(
            dt.F.linearReduceScatter([dt.F.gelu(h!)], [w[2]!], {
              dim: 1,
              bias: w[3]!,
              meshDim: tp,
            })
          );
        });
      const shapes = [[12, 8], [12], [8, 12], [8]];
      const w = [
        make(shapes[0]!, 2, mesh, on(dt.Shard(0))),
        make(shapes[1]!, 3, mesh, on(dt.Shard(0))),
        make(shapes[2]!, 4, mesh, on(dt.Shard(1))),
        make(shapes[3]!, 5, mesh),
      ];
      const w1 = shapes.map((s, i) => make(s, 2 + i, one));
      let x = make([1, 9, 8], 1, mesh, on(dt.Shard(1)));
      let x1 = make([1, 9, 8], 1, one);
      const live = dt.memory().numTensors;
      for (let i = 0; i < 20; i++) {
        const next = block(x, w);
        x.dispose();
        x = next;
        const next1 = dt.tidy(() => dt.F.linear(dt.F.gelu(dt.F.linear(dt.F.layerNorm(x1, [8]), w1[0]!, w1[1]!)), w1[2]!, w1[3]!).add(x1));
        x1.dispose();
        x1 = next1;
      }
      expect(dt.memory().numTensors).toBe(live); // the loop does not grow
      expect(x.placements[tp]!.toString()).toBe('S(1)');
      expect(await maxDiff(x, x1)).toBeLessThanOrEqual(1e-5); // 20 chained blocks
    });
  }

  it('refuses placements and shapes it cannot run, naming the fix', () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const x = dt.randn([1, 6, 4], { mesh, placements: [dt.Shard(1)] });
    const w = dt.randn([6, 4], { mesh, placements: [dt.Shard(0)] });
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return `${(e as dt.DTorchError).code}: ${(e as Error).message}`;
      }
      return 'no error';
    };
    expect(code(() => dt.F.allGatherLinear(x.redistribute([dt.Replicate()]), [w]))).toMatch(/PLACEMENT_MISMATCH.*sharded on a token dim/);
    expect(code(() => dt.F.allGatherLinear(x, [w.redistribute([dt.Shard(1)])]))).toMatch(/PLACEMENT_MISMATCH.*S\(0\) \(column parallel\) or R/);
    expect(code(() => dt.F.allGatherLinear(x, [dt.randn([6, 5], { mesh, placements: [dt.Shard(0)] })]))).toMatch(/SHAPE_MISMATCH.*\[out, 4\]/);
    expect(code(() => dt.F.allGatherLinear(x, [w], [dt.randn([6], { mesh })]))).toMatch(/PLACEMENT_MISMATCH.*place them alike/);
    expect(code(() => dt.F.allGatherLinear(x, []))).toMatch(/INVALID_ARGUMENT/);
    const h = dt.randn([1, 6, 6], { mesh, placements: [dt.Shard(2)] });
    const wo = dt.randn([4, 6], { mesh, placements: [dt.Shard(1)] });
    expect(code(() => dt.F.linearReduceScatter([h], [wo], { dim: 1 }))).toBe('no error');
    expect(
      code(() =>
        dt.F.linearReduceScatter([h.redistribute([dt.Replicate()])], [wo], {
          dim: 1,
        })
      )
    ).toMatch(/PLACEMENT_MISMATCH/);
    expect(code(() => dt.F.linearReduceScatter([h], [wo], { dim: 2 }))).toMatch(/INVALID_ARGUMENT.*feature dim/);
    expect(code(() => dt.F.linearReduceScatter([h], [wo, wo], { dim: 1 }))).toMatch(/one weight per input/);
    expect(
      code(() =>
        dt.F.linearReduceScatter([h], [wo], {
          dim: 1,
          bias: dt.randn([4], { mesh, placements: [dt.Partial()] }),
        })
      )
    ).toMatch(/bias.*must be R/);
    const unnamed = new dt.DeviceMesh('cpu', [0, 1]);
    expect(code(() => dt.F.allGatherLinear(dt.randn([2, 4], { mesh: unnamed }), [dt.randn([3, 4], { mesh: unnamed })]))).toMatch(
      /pass \{ meshDim \}/
    );
  });
});
