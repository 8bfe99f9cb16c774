// The op conformance fixture (tests/fixtures/engine_ops.json, made by
// tools/reference/make_engine_fixtures.py with PyTorch): its cases, how each one calls the public
// API, and the check of a result against PyTorch's. ops.test.ts runs it on every mesh kind
// present, tests/cluster on meshes over other processes.
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
  op: string;
  inputs: (Encoded | { scalar: number | boolean })[];
  attrs: {
    alpha?: number;
    dim?: number | number[];
    keepdim?: boolean;
    dtype?: dt.DType;
    approximate?: 'none' | 'tanh';
    min?: number;
    max?: number;
    shape?: number[];
    start?: number;
    end?: number;
    sizes?: number[];
    dims?: number[];
    size?: number | number[];
    chunks?: number;
    piece?: number;
    index?: (number | null | '...' | { slice: (number | null)[] })[];
    repeats?: number | number[];
    pad?: number[];
    value?: number;
    affine?: boolean;
    eps?: number;
    groups?: number;
    causal?: boolean;
    heads?: number;
    scale?: number;
    unbind?: -1 | -2;
    equation?: string;
    padding?: number[] | 'same';
    stride?: number[];
    dilation?: number[];
    mode?: 'nearest' | 'bilinear';
    corners?: boolean;
    kernel?: number | number[];
  };
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

// The fixture's ops, by name, called through the public API with the case's attributes.
type Arg = dt.Tensor | number | boolean;
const calls: Record<string, (args: Arg[], attrs: Case['attrs']) => dt.Tensor> = {
  add: ([a, b], { alpha }) => dt.add(a as dt.Tensor, b!, { alpha }),
  sub: ([a, b], { alpha }) => dt.sub(a as dt.Tensor, b!, { alpha }),
  matmul: ([a, b]) => (a as dt.Tensor).matmul(b as dt.Tensor),
  sum: ([a], { dim, keepdim }) => (a as dt.Tensor).sum(dim, keepdim ?? false),
  mean: ([a], { dim, keepdim }) => (a as dt.Tensor).mean(dim, keepdim ?? false),
  any: ([a], { dim, keepdim }) => (a as dt.Tensor).any(dim, keepdim ?? false),
  all: ([a], { dim, keepdim }) => (a as dt.Tensor).all(dim, keepdim ?? false),
  max: ([a]) => (a as dt.Tensor).max(),
  maxValues: ([a], { dim, keepdim }) => (a as dt.Tensor).max(dim as number, keepdim).values,
  maxIndices: ([a], { dim, keepdim }) => (a as dt.Tensor).max(dim as number, keepdim).indices,
  minValues: ([a], { dim, keepdim }) => (a as dt.Tensor).min(dim as number, keepdim).values,
  minIndices: ([a], { dim, keepdim }) => (a as dt.Tensor).min(dim as number, keepdim).indices,
  argmax: ([a], { dim, keepdim }) => (a as dt.Tensor).argmax(dim as number | undefined, keepdim ?? false),
  softmax: ([a], { dim }) => (a as dt.Tensor).softmax(dim as number),
  reshape: ([a], { shape }) => (a as dt.Tensor).reshape(shape!),
  flatten: ([a], { start, end }) => (a as dt.Tensor).flatten(start, end),
  unflatten: ([a], { dim, sizes }) => (a as dt.Tensor).unflatten(dim as number, sizes!),
  permute: ([a], { dims }) => (a as dt.Tensor).permute(dims!),
  transpose: ([a], { dims }) => (a as dt.Tensor).transpose(dims![0]!, dims![1]!),
  unsqueeze: ([a], { dim }) => (a as dt.Tensor).unsqueeze(dim as number),
  squeeze: ([a], { dim }) => (a as dt.Tensor).squeeze(dim),
  expand: ([a], { shape }) => (a as dt.Tensor).expand(shape!),
  cat: (ts, { dim }) => dt.cat(ts as dt.Tensor[], dim as number),
  stack: (ts, { dim }) => dt.stack(ts as dt.Tensor[], dim as number),
  splitPiece: ([a], { size, dim, piece }) => (a as dt.Tensor).split(size!, dim as number)[piece!]!,
  chunkPiece: ([a], { chunks, dim, piece }) => (a as dt.Tensor).chunk(chunks!, dim as number)[piece!]!,
  unbindPiece: ([a], { dim, piece }) => (a as dt.Tensor).unbind(dim as number)[piece!]!,
  get: ([a], { index }) =>
    (a as dt.Tensor).get(...index!.map((i) => (i !== null && typeof i === 'object' ? dt.slice(...(i.slice as [number, number, number])) : i))),
  set: ([a, v], { index }) =>
    (a as dt.Tensor).clone().set(...index!.map((i) => (i !== null && typeof i === 'object' ? dt.slice(...(i.slice as [number, number, number])) : i)), v as dt.Tensor),
  indexSelect: ([a, i], { dim }) => (a as dt.Tensor).indexSelect(dim as number, i as dt.Tensor),
  repeat: ([a], { repeats }) => (a as dt.Tensor).repeat(...(repeats as number[])),
  repeatInterleave: ([a], { repeats, dim }) => (a as dt.Tensor).repeatInterleave(repeats as number, dim as number),
  pad: ([a], { pad, value }) => dt.F.pad(a as dt.Tensor, pad!, { value }),
  linear: ([x, w, b]) => dt.F.linear(x as dt.Tensor, w as dt.Tensor, b as dt.Tensor | undefined),
  layerNorm: ([x, w, b], { shape, eps }) => dt.F.layerNorm(x as dt.Tensor, shape!, { weight: w as dt.Tensor, bias: b as dt.Tensor, eps }),
  rmsNorm: ([x, w], { shape, eps }) => dt.F.rmsNorm(x as dt.Tensor, shape!, { weight: w as dt.Tensor | undefined, eps }),
  groupNorm: ([x, w, b], { groups, eps }) => dt.F.groupNorm(x as dt.Tensor, groups!, { weight: w as dt.Tensor, bias: b as dt.Tensor, eps }),
  embedding: ([ids, w]) => dt.F.embedding(ids as dt.Tensor, w as dt.Tensor),
  sdpa: ([q, k, v, m], { causal, scale, heads }) =>
    dt.F.scaledDotProductAttention(q as dt.Tensor, k as dt.Tensor, v as dt.Tensor, { attnMask: m as dt.Tensor | undefined, isCausal: causal, scale, heads }),
  rotary: ([x, c, s], { unbind }) => dt.F.applyRotaryEmb(x as dt.Tensor, [c as dt.Tensor, s as dt.Tensor], { useRealUnbindDim: unbind }),
  outer: ([a, b]) => dt.outer(a as dt.Tensor, b as dt.Tensor),
  einsum: ([a], { equation }) => dt.einsum(equation!, a as dt.Tensor),
  conv2d: ([x, w, b], { padding, stride, dilation, groups }) =>
    dt.F.conv2d(x as dt.Tensor, w as dt.Tensor, b as dt.Tensor | undefined, {
      padding: padding as [number, number] | 'same' | undefined,
      stride: stride as [number, number] | undefined,
      dilation: dilation as [number, number] | undefined,
      groups,
    }),
  interpolate: ([x], { size, scale, mode, corners }) =>
    dt.F.interpolate(x as dt.Tensor, { size: size as unknown as [number, number] | undefined, scaleFactor: scale, mode, alignCorners: corners }),
  avgPool2d: ([x], { kernel, stride, padding }) =>
    dt.F.avgPool2d(x as dt.Tensor, kernel as number, { stride: stride as [number, number], padding: padding as [number, number] }),
  maxPool2d: ([x], { kernel, stride }) => dt.F.maxPool2d(x as dt.Tensor, kernel as [number, number], { stride: stride as [number, number] }),
  logSoftmax: ([a], { dim }) => (a as dt.Tensor).logSoftmax(dim as number),
  to: ([a], { dtype }) => (a as dt.Tensor).to(dtype!),
  gelu: ([a], { approximate }) => dt.F.gelu(a as dt.Tensor, { approximate }),
  clamp: ([a], { min, max }) => dt.clamp(a as dt.Tensor, min, max),
  where: ([c, a, b]) => dt.where(c as dt.Tensor, a!, b!),
  maskedFill: ([x, m, v]) => dt.maskedFill(x as dt.Tensor, m as dt.Tensor, v as number),
};

export function run(c: Case, mesh: dt.DeviceMesh): dt.Tensor {
  const args = c.inputs.map((i) => ('scalar' in i ? i.scalar : toTensor(i, mesh)));
  const call = calls[c.op];
  if (call) return call(args, c.attrs);
  const fn = (dt as unknown as Record<string, (...a: Arg[]) => dt.Tensor>)[c.op];
  if (!fn) throw new Error(`the fixture names op ${c.op}, which dt does not export`);
  return fn(...args);
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

