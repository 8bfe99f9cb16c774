// The op conformance fixture (tests/fixtures/engine_ops.json, made by
// tools/reference/make_engine_fixtures.py with PyTorch): its cases, each with the public API
// call it stands for, and the check of a result against PyTorch's. ops.test.ts runs it on every
// mesh kind present, tests/cluster on meshes over other processes.
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import * as dt from '@dtorch/api';

export interface Encoded {
  shape: number[];
  dtype: dt.DType;
  values: (number | boolean | 'nan' | 'inf' | '-inf')[];
}

// JSON has no NaN or infinity: the fixture writes them as strings.
export function decode(v: Encoded['values'][number]): number | boolean {
  return v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : v;
}
export interface Case {
  name: string;
  /** "name" (dt.name), "F.name" (dt.F.name) or ".name" (a method of the first argument). */
  call: string;
  /** JSON values, with { input: k } for input k and { slice: [start, end, step] } for dt.slice(...). */
  args: unknown[];
  /** The key or index of the result to check ({ values, indices }, a split's pieces). */
  pick?: string | number;
  inputs: (Encoded | { scalar: number | boolean })[];
  expected: Encoded;
}
export interface RandomCase {
  op: 'rand' | 'randn';
  seed: number;
  expected: Encoded;
}
export const fixture = JSON.parse(readFileSync(new URL('../fixtures/engine_ops.json', import.meta.url), 'utf8')) as {
  torch: string;
  cases: Case[];
  random: RandomCase[];
};

function toTensor(input: Encoded, mesh: dt.DeviceMesh): dt.Tensor {
  const values = input.dtype === 'bool' ? input.values.map(Boolean) : (input.values.map(decode) as number[]);
  return dt.tensor(values, { shape: input.shape, dtype: input.dtype, mesh });
}

// The case's call through the public API, as the fixture spells it (the reference script writes
// PyTorch's call and DTorch's side by side): no per-op table here.
export function run(c: Case, mesh: dt.DeviceMesh): dt.Tensor {
  const inputs = c.inputs.map((i) => ('scalar' in i ? i.scalar : toTensor(i, mesh)));
  const value = (a: unknown): unknown => {
    if (Array.isArray(a)) return a.map(value);
    if (a === null || typeof a !== 'object') return a;
    if ('input' in a) return inputs[(a as { input: number }).input];
    if ('slice' in a) return dt.slice(...((a as { slice: [number | null, number | null, number | null] }).slice as [number, number, number]));
    return Object.fromEntries(Object.entries(a).map(([k, v]) => [k, value(v)]));
  };
  const args = c.args.map(value);
  type Fn = (...a: unknown[]) => unknown;
  let result: unknown;
  if (c.call.startsWith('.')) {
    const self = args[0] as unknown as Record<string, Fn>;
    const method = self[c.call.slice(1)];
    if (typeof method !== 'function') throw new Error(`the fixture calls method ${c.call}, which a Tensor lacks`);
    result = method.apply(self, args.slice(1));
  } else {
    const [where, name] = c.call.startsWith('F.') ? [dt.F, c.call.slice(2)] : [dt, c.call];
    const fn = (where as unknown as Record<string, Fn>)[name];
    if (typeof fn !== 'function') throw new Error(`the fixture calls ${c.call}, which @dtorch/api does not export`);
    result = fn(...args);
  }
  return (c.pick === undefined ? result : (result as Record<string | number, unknown>)[c.pick]) as dt.Tensor;
}

export function expectValues(actual: dt.NestedArray, t: dt.Tensor, expected: Encoded): void {
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
    const want = decode(expected.values[i]!);
    if (exact || typeof v === 'boolean' || !Number.isFinite(want)) expect(v).toBe(want);
    else expect(Math.abs((v as number) - (want as number))).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want as number)));
  });
}

