// dt.Generator against torch.Generator: several draws in a row from one seed (the fixture
// tests/fixtures/generator_draws.json, made by tools/reference/make_generator_fixtures.py) give
// torch's values on every mesh kind, sharded or not; a bad generator or seed is refused and a
// refused draw leaves the generator where it was.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from './meshes.js';

interface Draw {
  op: 'rand' | 'randn' | 'randint';
  shape: number[];
  dtype: dt.DType;
  low?: number;
  high?: number;
  values: number[];
}
const fixture = JSON.parse(readFileSync(new URL('../fixtures/generator_draws.json', import.meta.url), 'utf8')) as { sequences: { seed: number; draws: Draw[] }[] };

function draw(d: Draw, generator: dt.Generator, mesh: dt.DeviceMesh): dt.Tensor {
  // the first dim sharded where the mesh has more than one device and it divides
  const placements = mesh.shape.map((n) => (n > 1 && d.shape[0]! % n === 0 ? dt.Shard(0) : dt.Replicate()));
  const options = { generator, dtype: d.dtype, mesh, placements };
  return d.op === 'randint' ? dt.randint(d.low!, d.high!, d.shape, options) : dt[d.op](d.shape, options);
}

describe.each(meshCases)('dt.Generator on $name', ({ make, skip }) => {
  it.skipIf(skip)("continues its stream as torch.Generator does, draw after draw", async () => {
    const mesh = make();
    for (const { seed, draws } of fixture.sequences) {
      const generator = new dt.Generator(seed);
      for (const [i, d] of draws.entries()) {
        const t = draw(d, generator, mesh);
        const values = Array.from((await t.to(d.dtype === 'int64' || d.dtype === 'float64' ? 'float64' : 'float32').data()) as Float32Array | Float64Array);
        const expected = d.dtype === 'float64' ? d.values : d.values.map(Math.fround);
        expect(values, `seed ${seed}, draw ${i} (${d.op} ${d.dtype} [${d.shape.join(', ')}])`).toEqual(expected);
        t.dispose();
      }
      expect(generator.draws).toBe(draws.length);
    }
  });
});

describe('dt.Generator', () => {
  it('starts again from its seed after manualSeed, and a seeded draw is its first draw', async () => {
    const g = new dt.Generator(3);
    const first = await dt.randn([6], { generator: g }).array();
    await dt.randn([6], { generator: g }).array();
    g.manualSeed(3);
    expect(g.draws).toBe(0);
    expect(await dt.randn([6], { generator: g }).array()).toEqual(first);
    expect(await dt.randn([6], { seed: 3 }).array()).toEqual(first);
    expect(g.initialSeed()).toBe(3);
  });

  it('refuses a bad seed, a seed beside a generator, and a generator that is not one; a refused draw is not counted', () => {
    expect(() => new dt.Generator(-1)).toThrow(/integer in \[0, 2\^48\) for Generator seed/);
    expect(() => new dt.Generator(0.5)).toThrow(/INVALID_ARGUMENT|integer/);
    const g = new dt.Generator(1);
    expect(() => dt.randn([2], { generator: g, seed: 1 })).toThrow(/give seed or generator, not both/);
    expect(() => dt.rand([2], { generator: {} as dt.Generator })).toThrow(/a dt\.Generator for rand generator/);
    expect(() => dt.randn([2], { generator: g, dtype: 'int32' })).toThrow(/floating dtype/);
    expect(g.draws).toBe(0);
  });
});
