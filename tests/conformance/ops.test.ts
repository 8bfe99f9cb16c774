// The op conformance suite: every case of tests/fixtures/engine_ops.json (made by
// tools/reference/make_engine_fixtures.py with PyTorch) on every mesh kind present.
// Replicate placements: every rank computes the full value, and reads must equal PyTorch's.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from './meshes.js';

interface Encoded {
  shape: number[];
  dtype: dt.DType;
  values: (number | boolean)[];
}
interface Case {
  name: string;
  op: string;
  inputs: (Encoded | { scalar: number })[];
  attrs: { alpha?: number; dim?: number[]; keepdim?: boolean; dtype?: dt.DType };
  expected: Encoded;
}
interface RandomCase {
  op: 'rand' | 'randn';
  seed: number;
  expected: Encoded;
}
const fixture = JSON.parse(readFileSync(new URL('../fixtures/engine_ops.json', import.meta.url), 'utf8')) as {
  torch: string;
  cases: Case[];
  random: RandomCase[];
};

function toTensor(input: Encoded, mesh: dt.DeviceMesh): dt.Tensor {
  const values = input.dtype === 'bool' ? input.values.map(Boolean) : (input.values as number[]);
  return dt.tensor(values, { shape: input.shape, dtype: input.dtype, mesh });
}

function run(c: Case, mesh: dt.DeviceMesh): dt.Tensor {
  const args = c.inputs.map((i) => ('scalar' in i ? i.scalar : toTensor(i, mesh)));
  const [a, b] = args as [dt.Tensor, dt.Tensor | number];
  switch (c.op) {
    case 'add':
      return a.add(b, { alpha: c.attrs.alpha });
    case 'sub':
      return a.sub(b, { alpha: c.attrs.alpha });
    case 'mul':
      return a.mul(b);
    case 'div':
      return a.div(b);
    case 'matmul':
      return a.matmul(b as dt.Tensor);
    case 'sum':
      return a.sum(c.attrs.dim, c.attrs.keepdim ?? false);
    case 'to':
      return a.to(c.attrs.dtype!);
    default:
      return (a as unknown as Record<string, () => dt.Tensor>)[c.op]!();
  }
}

function expectValues(actual: dt.NestedArray, t: dt.Tensor, expected: Encoded): void {
  expect(t.shape).toEqual(expected.shape);
  expect(t.dtype).toBe(expected.dtype);
  const flat: (number | boolean)[] = [];
  const walk = (v: dt.NestedArray): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else flat.push(v as number | boolean);
  };
  walk(actual);
  expect(flat.length).toBe(expected.values.length);
  const exact = !['float32', 'float64'].includes(expected.dtype);
  flat.forEach((v, i) => {
    const want = expected.values[i]!;
    if (exact || typeof v === 'boolean') expect(v).toBe(want);
    else expect(Math.abs((v as number) - (want as number))).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want as number)));
  });
}

describe.each(meshCases)('ops on $name', ({ make, skip }) => {
  const skipped = skip ? ` (skipped: ${skip})` : '';
  it.skipIf(skip)(`match PyTorch on every fixture case${skipped}`, async () => {
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

  it.skipIf(skip)(`draw the same random tensors as a seeded torch.Generator${skipped}`, async () => {
    const mesh = make();
    for (const r of fixture.random) {
      const t = dt[r.op]([3, 5], { seed: r.seed, mesh });
      expect(Array.from((await t.data()) as Float32Array)).toEqual(r.expected.values.map((v) => Math.fround(v as number)));
    }
  });
});
