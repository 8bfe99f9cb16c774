// The op conformance suite: every case of tests/fixtures/engine_ops.json (made by
// tools/reference/make_engine_fixtures.py with PyTorch) on every mesh kind present.
// Replicate placements: every rank computes the full value, and reads must equal PyTorch's.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { decode, expectValues, fixture, run } from './fixture_cases.js';
import { meshCases } from './meshes.js';

describe.each(meshCases)('ops on $name', ({ make, skip }) => {
  it.skipIf(skip)('match PyTorch on every fixture case', async () => {
    const mesh = make();
    for (const c of fixture.cases) {
      const out = run(c, mesh);
      try {
        expectValues(await out.array(), out, c.expected);
      } catch (err) {
        throw new Error(`case "${c.name}": ${(err as Error).message}`);
      }
    }
  });

  it.skipIf(skip)('draw the same random tensors as a seeded torch.Generator', async () => {
    const mesh = make();
    for (const r of fixture.random) {
      const t = dt[r.op]([3, 5], { seed: r.seed, mesh });
      expect(Array.from((await t.data()) as Float32Array)).toEqual(r.expected.values.map((v) => Math.fround(decode(v) as number)));
    }
  });
});
