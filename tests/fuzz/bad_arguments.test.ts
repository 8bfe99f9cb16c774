// Fuzz of bad arguments: every op of the surface, called from a valid call with one argument
// spoilt: a number out of range (huge, negative, fractional, NaN, ±Infinity, -0, 2^53 + 1, 2^63,
// a bigint), an options object of the wrong type (a Tensor, a number, an unknown or snake_case
// name, a boolean given 'yes'), or tensors the op cannot take (bool matmul, 0-d cat, a pool kernel
// larger than its input). Three oracles:
//  - refused: a DTorchError with a code, never a TypeError or RangeError, never a crash; an
//    integer argument given anything but an exact integer, an option of the wrong type and the
//    listed bad calls are always refused, at the call;
//  - atomic: a call that throws leaves memory().numTensors and every input's values as they were,
//    and the op's valid call computes right after;
//  - meant: a call that returns reads without a kernel failure, and where a reference is cheap
//    (fill values, slicing and narrowing, device indices, ranges) its values are the reference's.
import { appendFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine, opTable } from '@dtorch/core';
import { Gen, propertySeed } from '../distributed/random.js';

type AnyFn = (...args: unknown[]) => unknown;
const api = dt as unknown as Record<string, AnyFn>;
const F = dt.F as unknown as Record<string, AnyFn>;

// ---- the pool: small fixed inputs, their values checked at the end --------------------------

const mesh2 = new dt.DeviceMesh('cpu', [0, 1]);
const tpMesh = dt.initDeviceMesh('cpu', [2], ['tp']);
const fl = (n: number, scale = 1) => Array.from({ length: n }, (_, i) => ((i * 7) % 11) * scale - 3);
const pool = {
  x: dt.tensor(fl(24, 0.5), { shape: [2, 3, 4] }),
  v: dt.tensor(fl(4, 0.25)),
  m: dt.tensor(fl(16, 0.5), { shape: [4, 4] }),
  r6: dt.arange(6),
  i64: dt.tensor([3n, -1n, 0n, 2n]),
  u8: dt.tensor([1, 2, 250, 0], { dtype: 'uint8' }),
  f16: dt.tensor(fl(4), { dtype: 'float16' }),
  b: dt.tensor([true, false, true, true]),
  bm: dt.tensor([true, false, true, true], { shape: [2, 2] }),
  idx: dt.tensor([0n, 1n]),
  img: dt.tensor(fl(32, 0.1), { shape: [1, 2, 4, 4] }),
  w: dt.tensor(fl(36, 0.1), { shape: [2, 2, 3, 3] }),
  bias: dt.tensor([0.5, -0.5]),
  q: dt.tensor(fl(24, 0.1), { shape: [1, 2, 3, 4] }),
  mask: dt.tensor([true, true, false, true, true, true, false, false, true], { shape: [3, 3] }),
  lin: dt.tensor(fl(12, 0.2), { shape: [3, 4] }),
  s0: dt.tensor(2.5),
  sharded: dt.tensor(fl(8), { shape: [4, 2], mesh: mesh2, placements: [dt.Shard(0)] }),
  tpx: dt.tensor(fl(8), { shape: [4, 2], mesh: tpMesh, placements: [dt.Shard(0)] }),
  tpw: dt.tensor(fl(8), { shape: [4, 2], mesh: tpMesh, placements: [dt.Shard(0)] }),
};
const P = pool;
const fresh = () => P.x.clone(); // a target for set(), which assigns into its first argument

// ---- the cases --------------------------------------------------------------------------------

/** What a call means, where a cheap reference says it: the values, or that it must be refused. */
type Expected = { values: readonly (number | bigint | boolean)[]; approx?: boolean } | 'refuse' | undefined;

interface Case {
  name: string;
  call: AnyFn;
  /** A valid call's arguments (fresh each time). */
  args: () => unknown[];
  /** Numeric leaves (paths into args, '1' or '2.value') that are reals, not integers. */
  reals?: readonly string[];
  /** Integer leaves that are slice bounds: any integer is meaningful (Python clamps them). */
  bounds?: readonly string[];
  /** Leaves where a bigint is a value (tensor data). */
  bigints?: readonly string[];
  /** Leaves that size an allocation: left out for the large valid numbers (they would only fill memory). */
  sizes?: readonly string[];
  /** The index of the options argument. */
  options?: number;
  /** Calls the op must refuse at the call (wrong tensors, bad index combinations). */
  bad?: () => unknown[][];
  /** The reference for the valid call and for calls spoilt at one of `checks` (default: the reals). */
  reference?: (args: unknown[]) => Expected;
  checks?: readonly string[];
}

// The op table's unary ops (one tensor, no attributes) and binary ops (those with a tensor-scalar
// form, `<name>_scalar`), by their dt names: a new one is fuzzed here without a line of its own.
const dtName = (op: string): string => op.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const unary = Object.entries(opTable).filter(([, op]) => op.numInputs === 1 && op.attrs === '').map(([name]) => dtName(name));
const binary = Object.keys(opTable).filter((name) => `${name}_scalar` in opTable).map(dtName);
// unary ops that refuse a bool tensor
const noBoolUnary = new Set(['neg', 'abs', 'relu', 'floor', 'round']);

const fn = (name: string): AnyFn => {
  const f = api[name] ?? F[name];
  if (!f) throw new Error(`no op ${name}`);
  return f;
};

// PyTorch's value for a fill of `v` into `dtype` (its checked conversion), or 'refuse'.
function castReference(v: number, dtype: dt.DType, { asFloat = false, reducedInf = false, floatInf = false } = {}): Expected {
  const ranges: Partial<Record<dt.DType, [number, number]>> = {
    uint8: [0, 255], int8: [-128, 127], int16: [-32768, 32767], int32: [-(2 ** 31), 2 ** 31 - 1], int64: [-(2 ** 63), 2 ** 63],
  };
  const r = ranges[dtype];
  if (dtype === 'bool') return { values: [v !== 0] };
  if (r) {
    const int = Number.isInteger(v) && v >= -(2 ** 63) && v < 2 ** 63 && !asFloat;
    if (!Number.isFinite(v)) return 'refuse';
    if (dtype === 'uint8' && int && v < 0 && v >= -255) return { values: [v + 256] };
    if (v < r[0] || (dtype === 'int64' ? v >= r[1] : v > r[1])) return 'refuse';
    return { values: [dtype === 'int64' ? BigInt(Math.trunc(v)) : Math.trunc(v) + 0] };
  }
  const max = { float32: 3.4028234663852886e38, float16: 65504, bfloat16: 3.3895313892515355e38 }[dtype as 'float32'];
  if (max !== undefined && Number.isFinite(v) && Math.abs(v) > max) {
    if ((reducedInf && dtype !== 'float32') || floatInf) return { values: [Math.sign(v) * Infinity] };
    return 'refuse';
  }
  if (dtype === 'float32') return { values: [Math.fround(v)] };
  if (dtype === 'float64') return { values: [v] };
  return { values: [v], approx: true };
}

// One value's expectation for `n` elements.
const times = (n: number, one: Expected): Expected =>
  typeof one === 'object' ? { ...one, values: Array.from({ length: n }, () => one.values[0]!) } : one;

// Python's slice of range(n): start, end (clamped), step >= 1.
function pythonSlice(n: number, start: unknown, end: unknown, step: unknown): Expected {
  if (![start, end, step].every((v) => typeof v === 'number' && Number.isInteger(v)) || (step as number) < 1) return 'refuse';
  const clamp = (i: number) => Math.min(Math.max(i < 0 ? i + n : i, 0), n);
  const out: number[] = [];
  for (let i = clamp(start as number); i < clamp(end as number); i += step as number) out.push(i);
  return { values: out.map(BigInt) };
}

// torch.narrow of range(n).
function narrowReference(n: number, dim: unknown, start: unknown, length: unknown): Expected {
  if (!(dim === 0 || dim === -1) || !Number.isSafeInteger(start) || !Number.isSafeInteger(length)) return 'refuse';
  const [s, l] = [start as number, length as number];
  if (s < -n || s > n || l < 0) return 'refuse';
  const from = s < 0 ? s + n : s;
  if (from + l > n) return 'refuse';
  return { values: Array.from({ length: l }, (_, i) => BigInt(from + i)) };
}

const fillDtypes: dt.DType[] = ['int64', 'int32', 'uint8', 'float32', 'float16', 'bool'];

const cases: Case[] = [
  // elementwise
  ...unary.map((name): Case => ({
    name,
    call: fn(name),
    args: () => [P.x],
    bad: () => (noBoolUnary.has(name) ? [[P.b]] : []),
  })),
  { name: 'gelu', call: fn('gelu'), args: () => [P.x, { approximate: 'tanh' }], options: 1, bad: () => [[P.i64]] },
  { name: 'clamp', call: fn('clamp'), args: () => [P.x, -1, 1], reals: ['1', '2'], bad: () => [[P.b, 0]] },
  { name: 'clamp int', call: fn('clamp'), args: () => [P.i64, 0, 2], reals: ['1', '2'],
    reference: ([, min]) => (typeof min === 'number' && !Number.isFinite(min) ? undefined : undefined) },
  ...binary.map((name): Case => ({
    name,
    call: fn(name),
    args: () => [P.x, name.startsWith('logical') ? P.x : 2],
    reals: ['1'],
    bad: () => (name === 'sub' ? [[P.b, P.b], [P.b, 1], [P.i64, true]] : name === 'pow' ? [[P.i64, -1], [P.b, P.b]] : []),
  })),
  { name: 'add alpha', call: fn('add'), args: () => [P.x, P.x, { alpha: 2 }], reals: ['2.alpha'], options: 2, bad: () => [[P.i64, P.i64, { alpha: 0.5 }]] },
  { name: 'sub alpha', call: fn('sub'), args: () => [P.i64, P.i64, { alpha: 3 }], reals: ['2.alpha'], options: 2, bad: () => [[P.u8, P.u8, { alpha: 300 }]] },
  { name: 'where', call: fn('where'), args: () => [P.b, P.v, 0.5], reals: ['2'], bad: () => [[P.i64, P.v, 1]] },
  ...fillDtypes.map((dtype): Case => ({
    name: `maskedFill ${dtype}`,
    call: fn('maskedFill'),
    args: () => [dtype === 'bool' ? P.b : P.v.to(dtype), dt.ones([4], { dtype: 'bool' }), 3],
    reals: ['2'],
    bad: () => [[P.v, P.i64, 1]],
    reference: ([, , value]) => times(4, typeof value === 'number' ? castReference(value, dtype) : undefined),
  })),
  // creation
  ...fillDtypes.map((dtype): Case => ({
    name: `full ${dtype}`,
    call: fn('full'),
    args: () => [[2], 3, { dtype }],
    reals: ['1'],
    sizes: ['0.0'],
    options: 2,
    reference: ([, value]) => times(2, typeof value === 'number' ? castReference(value, dtype, { reducedInf: true }) : undefined),
  })),
  ...fillDtypes.map((dtype): Case => ({
    name: `tensor ${dtype}`,
    call: fn('tensor'),
    args: () => [[5, 1], { dtype }],
    reals: ['0.0', '0.1'],
    options: 1,
    reference: ([data]) => {
      const leaves = data as unknown[];
      const out: (number | bigint | boolean)[] = [];
      let approx = false;
      for (const leaf of leaves) {
        if (typeof leaf === 'bigint') return undefined; // mixed kinds or bigints: checked below
        const one = castReference(leaf as number, dtype, { reducedInf: true, floatInf: true }); // torch.tensor: inf
        if (one === 'refuse') return 'refuse';
        if (one === undefined) return undefined;
        // torch.tensor rounds a float too large for float32 to inf
        out.push(dtype === 'float32' && Number.isFinite(one.values[0] as number) === false ? (one.values[0] as number) : one.values[0]!);
        approx ||= one.approx === true;
      }
      return { values: out, approx };
    },
  })),
  {
    name: 'tensor float32 big',
    call: fn('tensor'),
    args: () => [[1e300], { dtype: 'float32' }],
    reals: ['0.0'],
    bigints: ['0.0'],
    reference: ([data]) => {
      const leaf = (data as unknown[])[0];
      return { values: [typeof leaf === 'bigint' ? Math.fround(Number(leaf)) : Math.fround(leaf as number)] };
    },
  },
  {
    name: 'tensor bigint',
    call: fn('tensor'),
    args: () => [[2n ** 62n], { dtype: 'int64' }],
    bad: () => [[[2n ** 70n]], [[2n ** 63n]], [[2n ** 40n], { dtype: 'int32' }], [[-(2n ** 63n) - 1n]], [[256n], { dtype: 'uint8' }]],
  },
  { name: 'zeros', call: fn('zeros'), args: () => [[2, 3], { dtype: 'float32' }], options: 1, sizes: ['0.0', '0.1'] },
  { name: 'ones', call: fn('ones'), args: () => [[2, 3]], sizes: ['0.0', '0.1'] },
  { name: 'empty', call: fn('empty'), args: () => [[2, 3]], sizes: ['0.0', '0.1'] },
  {
    name: 'arange',
    call: fn('arange'),
    args: () => [1, 7, 2],
    reals: ['0', '1', '2'],
    sizes: ['0', '1', '2'],
    checks: ['0', '1', '2'],
    options: 3,
    bad: () => [[0, 2, 1, { dtype: 'bool' }], [0, 2.5, 1, { dtype: 'int64' }]],
    reference: ([start, end, step]) => {
      if (![start, end, step].every((v) => typeof v === 'number' && Number.isFinite(v))) return 'refuse';
      const [a, b, s] = [start as number, end as number, step as number];
      if (s === 0 || (s > 0 && b < a) || (s < 0 && b > a)) return 'refuse';
      const n = Math.ceil((b - a) / s);
      if (n > 1e6) return undefined; // too long to compare (or refused as too large)
      const int = [a, b, s].every((v) => Number.isInteger(v) && Math.abs(v) < 2 ** 63);
      return { values: Array.from({ length: n }, (_, i) => (int ? BigInt(a) + BigInt(i) * BigInt(s) : Math.fround(a + i * s))), approx: !int };
    },
  },
  { name: 'eye', call: fn('eye'), args: () => [3, 2], options: 2, sizes: ['0', '1'] },
  { name: 'rand', call: fn('rand'), args: () => [[3], { seed: 5 }], options: 1, sizes: ['0.0'] },
  { name: 'randn', call: fn('randn'), args: () => [[3], { seed: 5, dtype: 'float32' }], options: 1, sizes: ['0.0'] },
  {
    name: 'randint',
    call: fn('randint'),
    args: () => [0, 10, [3], { seed: 1 }],
    options: 3,
    sizes: ['2.0'],
    bad: () => [[0, 300, [2], { dtype: 'uint8' }], [-1, 3, [2], { dtype: 'uint8' }], [0, 100000, [2], { dtype: 'float16' }], [3, 3, [2]]],
  },
  { name: 'manualSeed', call: fn('manualSeed'), args: () => [7] },
  { name: 'fullLike', call: fn('fullLike'), args: () => [P.i64, 2], reals: ['1'], options: 2 },
  { name: 'zerosLike', call: fn('zerosLike'), args: () => [P.x, { dtype: 'int32' }], options: 1 },
  { name: 'randnLike', call: fn('randnLike'), args: () => [P.x, { seed: 3 }], options: 1 },
  // reductions
  ...['sum', 'mean', 'any', 'all'].map((name): Case => ({ name, call: fn(name), args: () => [P.x, [0, -1], true], bad: () => [[P.x, [0, 0]]] })),
  ...['max', 'min', 'argmax'].map((name): Case => ({ name, call: fn(name), args: () => [P.x, 1, false], bad: () => (name === 'argmax' ? [[P.b]] : []) })),
  ...['softmax', 'logSoftmax'].map((name): Case => ({ name, call: fn(name), args: () => [P.x, -1] })),
  { name: 'to', call: fn('to'), args: () => [P.x, 'int32'] },
  { name: 'matmul', call: fn('matmul'), args: () => [P.m, P.v], bad: () => [[P.bm, P.bm], [P.m, P.v.to('float64')]] },
  // shape
  { name: 'reshape', call: fn('reshape'), args: () => [P.x, [6, -1]] },
  { name: 'flatten', call: fn('flatten'), args: () => [P.x, 1, 2] },
  { name: 'unflatten', call: fn('unflatten'), args: () => [P.x, 2, [2, 2]] },
  { name: 'squeeze', call: fn('squeeze'), args: () => [P.img, 0] },
  { name: 'unsqueeze', call: fn('unsqueeze'), args: () => [P.x, 1] },
  { name: 'permute', call: fn('permute'), args: () => [P.x, [2, 0, 1]] },
  { name: 'transpose', call: fn('transpose'), args: () => [P.x, 0, 2] },
  { name: 'expand', call: fn('expand'), args: () => [P.v, [3, 4]] },
  { name: 'cat', call: fn('cat'), args: () => [[P.x, P.x], 1], bad: () => [[[P.s0, P.s0]], [[P.s0]], [[P.x], 5]] },
  { name: 'stack', call: fn('stack'), args: () => [[P.v, P.v], 1], bad: () => [[[P.v, P.x]]] },
  { name: 'split', call: fn('split'), args: () => [P.x, [1, 2], 1], bad: () => [[P.s0, 1]] },
  { name: 'split size', call: fn('split'), args: () => [P.x, 2, 2] },
  { name: 'chunk', call: fn('chunk'), args: () => [P.x, 2, 2] },
  { name: 'unbind', call: fn('unbind'), args: () => [P.x, 1], bad: () => [[P.s0]] },
  {
    name: 'narrow',
    call: fn('narrow'),
    args: () => [P.r6, 0, 1, 2],
    checks: ['1', '2', '3'],
    bad: () => [[P.s0, 0, 0, 1]],
    reference: ([, dim, start, length]) => narrowReference(6, dim, start, length),
  },
  {
    name: 'sliceAlong',
    call: fn('sliceAlong'),
    args: () => [P.r6, 0, 1, 5, 2],
    bounds: ['2', '3', '4'],
    checks: ['1', '2', '3', '4'],
    reference: ([, dim, start, end, step]) => (dim === 0 || dim === -1 ? pythonSlice(6, start, end, step) : 'refuse'),
  },
  {
    name: 'get slice',
    call: (x, start, end, step) => (x as dt.Tensor).get(dt.slice(start as number, end as number, step as number)),
    args: () => [P.r6, -5, 4, 1],
    bounds: ['1', '2', '3'],
    checks: ['1', '2', '3'],
    reference: ([, start, end, step]) => pythonSlice(6, start, end, step),
  },
  { name: 'get', call: (x, i, j) => (x as dt.Tensor).get(i as number, null, '...', j as number), args: () => [P.x, 1, -1],
    bad: () => [[P.x, 2, 0], [P.x, 0, 4]] },
  { name: 'get tensor', call: (x, i) => (x as dt.Tensor).get(dt.slice(), i as dt.Tensor), args: () => [P.x, P.idx] },
  { name: 'indexSelect', call: fn('indexSelect'), args: () => [P.x, 2, P.idx], bad: () => [[P.s0, 0, P.idx], [P.x, 0, P.v]] },
  { name: 'repeat', call: fn('repeat'), args: () => [P.v, [2, 1]], sizes: ['1.0', '1.1'] },
  { name: 'repeatInterleave', call: fn('repeatInterleave'), args: () => [P.x, 2, 1], sizes: ['1'] },
  { name: 'pad', call: F['pad']!, args: () => [P.v, [1, 2], { value: 1.5 }], reals: ['2.value'], options: 2, sizes: ['1.0', '1.1'] },
  ...(['int64', 'uint8', 'float16'] as const).map((dtype): Case => ({
    name: `pad value ${dtype}`,
    call: (x, value) => (F['pad']!(x, [1, 0], { value }) as dt.Tensor).get(dt.slice(0, 1)),
    args: () => [P.v.to(dtype), 3],
    reals: ['1'],
    reference: ([, value]) => (typeof value === 'number' ? castReference(value, dtype, { asFloat: true }) : undefined),
  })),
  {
    name: 'set',
    call: (x, i, j, value) => (x as dt.Tensor).set(i as number, dt.slice(j as number), value as number),
    args: () => [fresh(), 1, -2, 0.5],
    reals: ['3'],
    bounds: ['2'],
  },
  {
    name: 'set (direct)',
    call: (x, ...rest) => (x as dt.Tensor).set(...(rest as [number])),
    args: () => [fresh(), 0, dt.slice(1), 2],
    reals: ['3'],
    bad: () => [[fresh(), '...', '...', 1], [fresh(), dt.slice(0.5), 1], [fresh(), dt.slice(0, 2, 0), 1], [fresh(), 0, 0, 0, 0, 1],
      [fresh(), dt.slice(), dt.slice(), P.idx.add(5), 1], [fresh(), P.idx.sub(3), 1], [fresh(), 0, P.x], [fresh(), null, 1], [fresh(), 0, 'spoons']],
  },
  { name: 'set tensor', call: (x, i, value) => (x as dt.Tensor).set(dt.slice(), dt.slice(), i as dt.Tensor, value as number),
    args: () => [fresh(), P.idx, 2], reals: ['2'] },
  // nn
  { name: 'linear', call: F['linear']!, args: () => [P.x, P.lin, dt.ones([3])], bad: () => [[P.bm, P.bm]] },
  { name: 'layerNorm', call: F['layerNorm']!, args: () => [P.x, [4], { eps: 1e-5, weight: dt.ones([4]) }], reals: ['2.eps'], options: 2 },
  { name: 'rmsNorm', call: F['rmsNorm']!, args: () => [P.x, 4, { eps: 1e-6 }], reals: ['2.eps'], options: 2 },
  { name: 'groupNorm', call: F['groupNorm']!, args: () => [P.img, 2, { eps: 1e-5 }], reals: ['2.eps'], options: 2 },
  { name: 'embedding', call: F['embedding']!, args: () => [P.idx, P.m] },
  {
    name: 'sdpa',
    call: F['scaledDotProductAttention']!,
    args: () => [P.q, P.q, P.q, { isCausal: true, scale: 0.5 }],
    reals: ['3.scale'],
    options: 3,
    bad: () => [[P.q, P.q, P.q, { attnMask: dt.ones([2, 2], { dtype: 'bool' }) }], [P.q.to('int64'), P.q.to('int64'), P.q.to('int64')]],
  },
  { name: 'sdpa mask', call: F['scaledDotProductAttention']!, args: () => [P.q, P.q, P.q, { attnMask: P.mask }], options: 3 },
  { name: 'sdpa heads', call: F['scaledDotProductAttention']!, args: () => [P.x, P.x, P.x, { heads: 2, isCausal: true }], options: 3, bad: () => [[P.x, P.x, P.x, { heads: 3 }]] },
  { name: 'applyRotaryEmb', call: F['applyRotaryEmb']!, args: () => [P.q, [dt.ones([3, 4]), dt.zeros([3, 4])], { useRealUnbindDim: -2 }], options: 2 },
  { name: 'outer', call: fn('outer'), args: () => [P.v, P.v], bad: () => [[P.m, P.v]] },
  { name: 'einsum', call: fn('einsum'), args: () => ['abc->cab', P.x] },
  { name: 'conv2d', call: F['conv2d']!, args: () => [P.img, P.w, P.bias, { stride: 1, padding: [1, 0], dilation: 1, groups: 1 }], options: 3,
    sizes: ['3.padding.0', '3.padding.1'],
    bad: () => [[P.img, P.w.to('float64')], [P.img, dt.zeros([2, 2, 5, 5])]] },
  { name: 'interpolate', call: F['interpolate']!, args: () => [P.img, { scaleFactor: 1.5, mode: 'bilinear', alignCorners: false }], reals: ['1.scaleFactor'], options: 1,
    sizes: ['1.scaleFactor'] },
  { name: 'interpolate size', call: F['interpolate']!, args: () => [P.img, { size: [3, 5] }], options: 1, sizes: ['1.size.0', '1.size.1'] },
  ...['avgPool2d', 'maxPool2d'].map((name): Case => ({
    name, call: F[name]!, args: () => [P.img, 2, { stride: [1, 2], padding: 1 }], options: 2, bad: () => [[P.img, 5], [P.img, [1, 5]]],
  })),
  // distribution
  { name: 'redistribute', call: fn('redistribute'), args: () => [P.sharded, [dt.Shard(1)]] },
  { name: 'toLocal', call: fn('toLocal'), args: () => [P.sharded, 1] },
  { name: 'localShape', call: fn('localShape'), args: () => [P.sharded, 1] },
  { name: 'explainRedistribute', call: fn('explainRedistribute'), args: () => [P.sharded, [dt.Replicate()]] },
  { name: 'Shard', call: (d) => dt.zeros([2, 2, 2], { mesh: mesh2, placements: [dt.Shard(d as number)] }), args: () => [-1] },
  {
    name: 'DeviceMesh',
    call: (d) => {
      const z = dt.zeros([1], { mesh: new dt.DeviceMesh('cpu', [d as number]) });
      const device = engine().layout(z.id)[0]!.device;
      if (device !== `cpu:${d}`) throw new Error(`DeviceMesh('cpu', [${d}]) runs on ${device}`);
      return z;
    },
    args: () => [1],
  },
  { name: 'initDeviceMesh', call: (a, b) => dt.zeros([1], { mesh: dt.initDeviceMesh('cpu', [a as number, b as number]) }), args: () => [1, 2] },
  { name: 'allGatherLinear', call: F['allGatherLinear']!, args: () => [P.tpx, [P.tpw.redistribute([dt.Replicate()])], [], { meshDim: 0 }], options: 3 },
  { name: 'linearReduceScatter', call: F['linearReduceScatter']!,
    args: () => [[P.tpx.redistribute([dt.Shard(1)])], [dt.ones([2, 2], { mesh: tpMesh, placements: [dt.Shard(1)] })], { dim: 0 }], options: 2 },
];

// ---- spoiling a call ----------------------------------------------------------------------------

const badNumbers: readonly (number | bigint)[] = [
  2 ** 70, 1e300, -1e300, 2 ** 63, -(2 ** 63), 2 ** 53 + 1, 2 ** 53 + 2, 2 ** 32 + 3, 2 ** 31, -(2 ** 31) - 1, -1, -7, 0.5, -1.5,
  NaN, Infinity, -Infinity, -0, 1e-300, 10n, 2n ** 70n,
];

type Path = string;
const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

function numericLeaves(value: unknown, path: Path, out: Path[]): void {
  if (typeof value === 'number') out.push(path);
  else if (Array.isArray(value)) value.forEach((v, i) => numericLeaves(v, `${path}.${i}`, out));
  else if (isPlain(value)) for (const [k, v] of Object.entries(value)) numericLeaves(v, `${path}.${k}`, out);
}

// args with the leaf at `path` replaced (copying the arrays and objects on the way).
function replaced(args: unknown[], path: Path, leaf: unknown): unknown[] {
  const keys = path.split('.').slice(1);
  const go = (v: unknown, k: number): unknown => {
    if (k === keys.length) return leaf;
    const key = keys[k]!;
    if (Array.isArray(v)) return v.map((e, i) => (String(i) === key ? go(e, k + 1) : e));
    return { ...(v as object), [key]: go((v as Record<string, unknown>)[key], k + 1) };
  };
  return go(args, 0) as unknown[];
}

// Wrong options: the whole object, an unknown or snake_case name, one field of the wrong type.
function badOptions(valid: Record<string, unknown>): unknown[] {
  const out: unknown[] = [P.v, 5, 'spoons', [1], () => 1, Symbol('options'), true, new Date(0), new Map([['dim', 0]])];
  out.push({ ...valid, bogusOption: 1 });
  for (const [key, value] of Object.entries(valid)) {
    const snake = key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if (snake !== key) out.push({ ...valid, [snake]: value });
    const wrong: unknown[] =
      typeof value === 'boolean' ? ['yes', 1, 0, 'true', {}]
      : typeof value === 'number' ? ['1', {}, [], true, Symbol('n'), () => 1, P.v, 'spoons']
      : typeof value === 'string' ? [1, {}, true, Symbol('s'), 'spoons']
      : value instanceof dt.Tensor ? [1, {}, 'spoons', true, [value]]
      : value instanceof dt.DeviceMesh ? [{}, 'cpu', 1, P.v]
      : Array.isArray(value) ? ['spoons', {}, [1, 2, 3], [true, true], [Symbol('e')]]
      : [];
    for (const w of wrong) out.push({ ...valid, [key]: w });
  }
  // placements and dtype and mesh apply to every creation options object
  if ('dtype' in valid) out.push({ ...valid, dtype: 'float33' }, { ...valid, placements: [Symbol('p')] }, { ...valid, placements: 'S(0)' }, { ...valid, mesh: 'cpu' });
  return out;
}

const describe1 = (v: unknown): string =>
  typeof v === 'symbol' ? v.toString() : typeof v === 'function' ? 'fn' : typeof v === 'bigint' ? `${v}n` : v instanceof dt.Tensor ? v.describe()
  : Array.isArray(v) ? `[${v.map(describe1).join(', ')}]` : isPlain(v) ? `{${Object.entries(v).map(([k, e]) => `${k}: ${describe1(e)}`).join(', ')}}` : String(v);

// ---- running a call under the three oracles ----------------------------------------------------

const outputsOf = (result: unknown): dt.Tensor[] =>
  (Array.isArray(result) ? result : result instanceof dt.Tensor ? [result] : isPlain(result) ? Object.values(result) : []).filter(
    (t): t is dt.Tensor => t instanceof dt.Tensor,
  );

function equalValues(got: ArrayLike<number | bigint>, dtype: dt.DType, expected: Exclude<Expected, 'refuse' | undefined>): boolean {
  if (got.length !== expected.values.length) return false;
  return expected.values.every((e, i) => {
    const g = got[i]!;
    const want = typeof e === 'boolean' ? (e ? 1 : 0) : e;
    if (typeof g === 'bigint' || typeof want === 'bigint') return BigInt(g as bigint) === BigInt(want as bigint);
    if (Number.isNaN(want)) return Number.isNaN(g);
    if (expected.approx && Number.isFinite(want)) return Math.abs((g as number) - (want as number)) <= Math.abs(want as number) * 1e-2 + 1e-3;
    return (g as number) === want || (dtype === 'float16' && !Number.isFinite(want) && g === want);
  });
}

interface Outcome {
  threw?: dt.DTorchError;
}

// `spoilt`: the leaf spoilt ('' for the valid call), or undefined for other spoilt calls.
async function runCall(c: Case, args: unknown[], what: string, mustRefuse: boolean, failures: string[], spoilt?: string): Promise<Outcome> {
  const before = dt.memory().numTensors;
  const target = c.name.startsWith('set') && args[0] instanceof dt.Tensor ? (args[0] as dt.Tensor) : undefined;
  const targetBefore = target ? Array.from(await target.data(), String) : undefined;
  const checked = spoilt === '' || (spoilt !== undefined && (c.checks ?? c.reals ?? []).includes(spoilt));
  const reference = checked ? c.reference?.(args) : undefined;
  let result: unknown;
  // DTORCH_FUZZ_TRACE=<file>: each call is logged before it runs, so that a crash names its call
  if (process.env['DTORCH_FUZZ_TRACE']) appendFileSync(process.env['DTORCH_FUZZ_TRACE'], `${what}\n`);
  try {
    result = c.call(...args);
  } catch (err) {
    if (!(err instanceof dt.DTorchError) || typeof err.code !== 'string') {
      failures.push(`${what}: threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
      return {};
    }
    // atomic: nothing left behind, the target as it was
    const after = dt.memory().numTensors;
    if (after !== before) failures.push(`${what}: threw ${err.code} but left ${after - before} tensor(s) behind`);
    if (target && targetBefore && JSON.stringify(Array.from(await target.data(), String)) !== JSON.stringify(targetBefore)) {
      failures.push(`${what}: threw ${err.code} but changed the tensor it assigns into`);
    }
    if (reference !== undefined && reference !== 'refuse') failures.push(`${what}: refused (${err.message}) a call the reference computes`);
    return { threw: err };
  }
  if (mustRefuse || reference === 'refuse') failures.push(`${what}: returned instead of refusing`);
  for (const t of outputsOf(result)) {
    if (t.numel > 2 ** 20) continue; // a large view (expand): computing it would only fill memory
    try {
      const data = await t.data();
      if (data.length !== t.numel) failures.push(`${what}: read ${data.length} values for ${t.describe()}`);
      if (reference && reference !== 'refuse' && !equalValues(data as ArrayLike<number>, t.dtype, reference)) {
        failures.push(`${what}: read ${Array.from(data as ArrayLike<number>).slice(0, 8).join(', ')} but the reference is ${reference.values.slice(0, 8).join(', ')}`);
      }
    } catch (err) {
      failures.push(`${what}: returned, then the read failed: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  dt.dispose(outputsOf(result).filter((t) => !Object.values(pool).includes(t) && t !== target));
  target?.dispose();
  return {};
}

describe('bad arguments (fuzz)', () => {
  it('are refused at the call, atomically, and what is accepted computes what it means', async () => {
    const g = new Gen(propertySeed + 14);
    const snapshot = await Promise.all(Object.values(pool).map(async (t) => JSON.stringify(Array.from(await t.data(), String))));
    const failures: string[] = [];
    let calls = 0;
    let refused = 0;
    const valid = async (c: Case, after: string) => {
      calls++;
      await runCall(c, c.args(), `${c.name} (the valid call, after ${after})`, false, failures, '');
    };
    for (const c of cases) {
      await valid(c, 'nothing');
      const spoilt: [string, unknown[], boolean, string?][] = [];
      // numbers: every leaf with every bad number (a random sample where an op has many leaves)
      const leaves: Path[] = [];
      numericLeaves(c.args(), '', leaves);
      for (const leaf of leaves.filter((l) => !(c.options !== undefined && l === `.${c.options}`))) {
        const path = leaf.slice(1);
        const real = c.reals?.includes(path) ?? false;
        const bound = c.bounds?.includes(path) ?? false;
        const size = c.sizes?.includes(path) ?? false;
        for (const n of badNumbers) {
          if (size && typeof n === 'number' && Math.abs(n) >= 2 ** 16 && Math.abs(n) < 2 ** 62) continue;
          if (leaves.length > 4 && !g.chance(4 / leaves.length)) continue;
          const exact = typeof n === 'number' && Number.isInteger(n) && (bound || Number.isSafeInteger(n));
          const bigintOk = c.bigints?.includes(path) ?? false;
          const mustRefuse = typeof n === 'bigint' ? !bigintOk : !real && !exact;
          spoilt.push([`${c.name} with ${path} = ${describe1(n)}`, replaced(c.args(), leaf, n), mustRefuse, path]);
        }
      }
      // options of the wrong type
      if (c.options !== undefined) {
        const validOptions = (c.args()[c.options] ?? {}) as Record<string, unknown>;
        for (const o of badOptions(validOptions)) {
          const args = c.args();
          args[c.options] = o;
          spoilt.push([`${c.name} with options ${describe1(o)}`, args, true]);
        }
      }
      for (const args of c.bad?.() ?? []) spoilt.push([`${c.name}(${args.map(describe1).join(', ')})`, args, true]);
      for (const [what, args, mustRefuse, listed] of spoilt) {
        calls++;
        const { threw } = await runCall(c, args, what, mustRefuse, failures, listed);
        if (threw) {
          refused++;
          await valid(c, what);
        }
      }
    }
    // the inputs were never changed
    const now = await Promise.all(Object.values(pool).map(async (t) => JSON.stringify(Array.from(await t.data(), String))));
    Object.keys(pool).forEach((name, i) => {
      if (now[i] !== snapshot[i]) failures.push(`pool tensor ${name} changed`);
    });
    expect(failures.slice(0, 40)).toEqual([]);
    expect(calls).toBeGreaterThan(2000);
    expect(refused).toBeGreaterThan(1000);
  }, 120_000);
});
