// The random op cases of the distributed property suites: an op on random shapes, dtypes and
// input placements (drawCase), and the check that a distributed result equals the same op on one
// device (expectLikeOneDevice). ops.property.test.ts runs them on this process's meshes,
// tests/cluster on meshes over other processes.
import { expect } from 'vitest';
import * as dt from '@dtorch/api';
import { Gen, numel } from './random.js';
import * as o from './placement_oracle.js';

const floats: dt.DType[] = ['float32', 'float32', 'bfloat16', 'float16'];
const numeric: dt.DType[] = [...floats, 'int64', 'int32'];
const every: dt.DType[] = [...numeric, 'bool', 'uint8'];

export interface OpCase {
  name: string;
  shapes: number[][];
  tolerance: number; // relative; 0 means bit-exact
  bools?: boolean[]; // inputs made as bool tensors (value > 0)
  ints?: number[]; // input 0 made as int64 ids in [0, ints[0])
  composite?: boolean; // built from other ops: a refusal names the inner op and its inputs
  dtypes?: dt.DType[]; // dtypes the case may run in (default float32)
  run: (inputs: dt.Tensor[]) => dt.Tensor;
  /** The op on host tensors, for the oracle's judgement of a refusal (and its family name there). */
  host?: { family: string; f: (x: o.Host[]) => o.Host; nonzero?: number[] };
}

const quickGelu = (v: number) => v / (1 + Math.exp(-1.702 * v));
const hostUnary: Record<string, (v: number) => number> = {
  relu: (v) => Math.max(0, v),
  abs: Math.abs,
  square: (v) => v * v,
  floor: Math.floor,
  exp: Math.exp,
  sigmoid: (v) => 1 / (1 + Math.exp(-v)),
  tanh: Math.tanh,
  silu: (v) => v / (1 + Math.exp(-v)),
  quickGelu,
  sin: Math.sin,
  neg: (v) => -v,
};
const hostBinary = { add: (a: number, b: number) => a + b, sub: (a: number, b: number) => a - b, mul: (a: number, b: number) => a * b, div: (a: number, b: number) => a / b };
const unaryHost = (name: string, f: (v: number) => number) => ({ family: name, f: ([x]: o.Host[]) => o.unary(x!, f) });

// A shape `b` that broadcasts against `a`: some dims dropped from the front or set to 1.
function broadcastPartner(g: Gen, a: number[]): number[] {
  const b = a.slice(g.int(0, a.length));
  return b.map((s) => (g.chance(0.25) ? 1 : s));
}

export function randomOp(g: Gen): OpCase {
  const kind = g.pick([
    'unary', 'linear-unary', 'binary', 'scalar', 'compare', 'where', 'matmul', 'reduce', 'extreme', 'softmax', 'cast',
    'view', 'view', 'join', 'nn', 'nn',
  ] as const);
  const a = g.shape(1, 3, 6);
  switch (kind) {
    case 'unary': {
      const op = g.pick(['relu', 'abs', 'square', 'floor', 'exp', 'sigmoid', 'tanh', 'silu', 'quickGelu', 'sin'] as const);
      const exact = ['relu', 'abs', 'square', 'floor'].includes(op);
      return { name: op, shapes: [a], tolerance: exact ? 0 : 1e-6, run: ([x]) => x![op](), host: unaryHost(op, hostUnary[op]!) };
    }
    case 'linear-unary':
      return { name: 'neg', shapes: [a], tolerance: 0, dtypes: numeric, run: ([x]) => x!.neg(), host: unaryHost('neg', hostUnary['neg']!) };
    case 'binary': {
      const op = g.pick(['add', 'sub', 'mul', 'div'] as const);
      const b = broadcastPartner(g, a);
      const host = { family: op, f: ([x, y]: o.Host[]) => o.binary(x!, y!, hostBinary[op]), nonzero: op === 'div' ? [1] : [] };
      return g.chance(0.5)
        ? { name: op, shapes: [a, b], tolerance: 0, dtypes: op === 'div' ? floats : numeric, run: ([x, y]) => x![op](y!), host }
        : { name: op, shapes: [b, a], tolerance: 0, dtypes: op === 'div' ? floats : numeric, run: ([x, y]) => x![op](y!), host };
    }
    case 'compare': {
      const op = g.pick(['eq', 'lt', 'ge', 'minimum', 'maximum'] as const);
      const b = broadcastPartner(g, a);
      return { name: op, shapes: [a, b], tolerance: 0, dtypes: numeric, run: ([x, y]) => x![op](y!) };
    }
    case 'where': {
      const [c, b] = [broadcastPartner(g, a), broadcastPartner(g, a)];
      return { name: 'where', shapes: [c, a, b], tolerance: 0, bools: [true, false, false], run: ([m, x, y]) => dt.where(m!, x!, y!) };
    }
    case 'scalar': {
      const op = g.pick(['add', 'sub', 'mul', 'div'] as const);
      const s = g.pick([2, -3, 0.5]);
      return { name: `${op}(${s})`, shapes: [a], tolerance: 0, dtypes: numeric, run: ([x]) => x![op](s), host: unaryHost(op, (v) => hostBinary[op](v, s)) };
    }
    case 'matmul': {
      const [m, k, n] = [g.int(1, 6), g.int(1, 6), g.int(1, 6)];
      const batch = g.chance(0.4) ? [g.int(1, 3)] : [];
      const lhs = g.chance(0.15) ? [k] : [...batch, m, k];
      const rhs = g.chance(0.15) ? [k] : [...(g.chance(0.5) ? batch : []), k, n];
      return { name: 'matmul', shapes: [lhs, rhs], tolerance: 1e-5, run: ([x, y]) => x!.matmul(y!), host: { family: 'matmul', f: ([x, y]) => o.matmul(x!, y!) } };
    }
    case 'reduce': {
      const op = g.pick(['sum', 'mean'] as const);
      const dims = g.chance(0.3) ? undefined : [g.int(-a.length, a.length - 1)];
      const keepdim = g.chance(0.5);
      return {
        name: `${op}(${dims ?? 'all'}, ${keepdim})`,
        shapes: [a],
        tolerance: 1e-5,
        run: ([x]) => x![op](dims, keepdim),
        host: { family: op, f: ([x]) => o.reduce(x!, op, dims, keepdim) },
      };
    }
    case 'extreme': {
      const dim = g.int(-a.length, a.length - 1);
      const keepdim = g.chance(0.5);
      const which = g.pick(['max', 'min-values', 'max-indices', 'argmax', 'any'] as const);
      if (which !== 'any') a.forEach((s, i) => (a[i] = s || 2)); // max/min over an empty dim is an error
      const run = {
        max: ([x]: dt.Tensor[]) => x!.max(),
        'min-values': ([x]: dt.Tensor[]) => x!.min(dim, keepdim).values,
        'max-indices': ([x]: dt.Tensor[]) => x!.max(dim, keepdim).indices,
        argmax: ([x]: dt.Tensor[]) => x!.argmax(dim, keepdim),
        any: ([x]: dt.Tensor[]) => x!.gt(0).any(dim, keepdim),
      }[which];
      return { name: `${which}(${dim}, ${keepdim})`, shapes: [a], tolerance: 0, dtypes: which === 'any' ? numeric : ['float32', 'int64', 'bfloat16'], run };
    }
    case 'softmax': {
      const dim = g.int(-a.length, a.length - 1);
      const op = g.pick(['softmax', 'logSoftmax'] as const);
      return { name: `${op}(${dim})`, shapes: [a], tolerance: 1e-6, run: ([x]) => x![op](dim) };
    }
    case 'view': {
      const d = g.int(0, a.length - 1);
      const which = g.pick(['flatten', 'unflatten', 'permute', 'unsqueeze', 'slice', 'expand', 'repeat', 'pad', 'contiguous'] as const);
      const perm = a.map((_, i) => i).sort(() => g.next() - 0.5);
      const run: Record<typeof which, (x: dt.Tensor) => dt.Tensor> = {
        flatten: (x) => x.flatten(),
        unflatten: (x) => x.unsqueeze(d).flatten(d, d + 1).unflatten(d, [1, a[d]!]),
        permute: (x) => x.permute(perm),
        unsqueeze: (x) => x.unsqueeze(d),
        slice: (x) => x.get(...a.slice(0, d).map(() => dt.slice()), dt.slice(1, null, 2)),
        expand: (x) => x.unsqueeze(0).expand([3, ...a]),
        repeat: (x) => x.repeat(...a.map((_, i) => (i === d ? 2 : 1))),
        pad: (x) => dt.F.pad(x, [1, 0]),
        contiguous: (x) => x.transpose(0, d).contiguous(),
      };
      return { name: which, shapes: [a], tolerance: 0, composite: true, dtypes: every, run: ([x]) => run[which](x!) };
    }
    case 'join': {
      const d = g.int(0, a.length - 1);
      const b = a.map((s, i) => (i === d ? g.int(0, 4) : s));
      const which = g.pick(['cat', 'stack', 'split'] as const);
      if (which === 'cat') return { name: `cat(${d})`, shapes: [a, b], tolerance: 0, dtypes: every, run: ([x, y]) => dt.cat([x!, y!], d) };
      if (which === 'stack') return { name: `stack(${d})`, shapes: [a, a], tolerance: 0, composite: true, dtypes: every, run: ([x, y]) => dt.stack([x!, y!], d) };
      return { name: `split(${d})`, shapes: [a], tolerance: 0, dtypes: every, run: ([x]) => x!.split(2, d).at(-1)! };
    }
    case 'nn': {
      const [n, din, dout] = [g.int(1, 5), g.int(1, 6), g.int(1, 6)];
      const which = g.pick(['linear', 'linear-bias', 'layerNorm', 'rmsNorm', 'embedding', 'sdpa', 'sdpa-causal', 'sdpa-heads'] as const);
      switch (which) {
        case 'linear':
          return { name: which, shapes: [[n, din], [dout, din]], tolerance: 1e-5, run: ([x, w]) => dt.F.linear(x!, w!), host: linearHost };
        case 'linear-bias':
          return { name: which, shapes: [[n, din], [dout, din], [dout]], tolerance: 1e-5, run: ([x, w, b]) => dt.F.linear(x!, w!, b!), host: linearHost };
        case 'layerNorm':
          return { name: which, shapes: [[n, 3, din], [din]], tolerance: 1e-5, run: ([x, w]) => dt.F.layerNorm(x!, [din], { weight: w! }) };
        case 'rmsNorm':
          return { name: which, shapes: [[n, din]], tolerance: 1e-5, run: ([x]) => dt.F.rmsNorm(x!, [din]) };
        case 'embedding': {
          const vocab = g.int(1, 6);
          return {
            name: which,
            shapes: [[n, 3], [vocab, din]],
            tolerance: 0,
            ints: [vocab],
            run: ([ids, w]) => dt.F.embedding(ids!, w!),
          };
        }
        case 'sdpa-heads': {
          // heads packed in the last dim: [B, L, heads·E]; split on that dim or by the sequence
          // over a named mesh dim, it is sdpa over views (a refusal names those)
          const heads = g.int(1, 3);
          const shape = [g.int(1, 3), g.int(1, 6), heads * g.int(1, 3)];
          return { name: which, shapes: [shape, shape, shape], tolerance: 1e-5, composite: true, run: ([q, k, v]) => dt.F.scaledDotProductAttention(q!, k!, v!, { heads }) };
        }
        default: {
          const shape = [g.int(1, 3), g.int(1, 4), g.int(1, 6), g.int(1, 4)];
          const isCausal = which === 'sdpa-causal';
          return { name: which, shapes: [shape, shape, shape], tolerance: 1e-5, run: ([q, k, v]) => dt.F.scaledDotProductAttention(q!, k!, v!, { isCausal }) };
        }
      }
    }
    case 'cast':
      return { name: 'to(float64)', shapes: [a], tolerance: 0, dtypes: every, run: ([x]) => x!.to('float64') };
  }
}

export const linearHost = { family: 'linear', f: ([x, w, b]: o.Host[]) => o.linear(x!, w!, b) };

/** One drawn case: the op, its inputs' values, placements and dtype, and how to make input k on a mesh. */
export interface DrawnCase {
  op: OpCase;
  placements: dt.Placement[][];
  dtype: dt.DType;
  what: string;
  make: (k: number, mesh: dt.DeviceMesh, placements?: dt.Placement[]) => dt.Tensor;
}

/** Draws case `index` of a run seeded `seed` on `mesh`. */
export function drawCase(g: Gen, mesh: dt.DeviceMesh, index: number, seed: number): DrawnCase {
  const op = randomOp(g);
  const data = op.shapes.map((s) => g.values(numel(s)).map((v) => (op.name === 'div' ? v + 0.5 : v)));
  const placements = op.shapes.map((s) => g.placements(mesh, s.length, ['sum', 'avg']));
  const dtype = op.dtypes ? g.pick(op.dtypes) : 'float32';
  const what = `case ${index} (seed ${seed}): ${op.name} in ${dtype} of [${op.shapes.map((s) => `[${s}]`)}] with ${placements
    .map(dt.formatPlacements)
    .join(', ')} on ${mesh}`;
  const make = (k: number, m: dt.DeviceMesh, p?: dt.Placement[]) => {
    if (op.bools?.[k]) return dt.tensor(data[k]!.map((v) => v > 0), { shape: op.shapes[k], mesh: m, placements: p, dtype: 'bool' });
    if (op.ints && k === 0) return dt.tensor(data[k]!.map((v) => Math.abs(v) % op.ints![0]!), { shape: op.shapes[k], mesh: m, placements: p, dtype: 'int64' });
    const values = dtype === 'bool' ? data[k]!.map((v) => v > 0) : dtype === 'uint8' ? data[k]!.map(Math.abs) : data[k]!;
    return dt.tensor(values as number[], { shape: op.shapes[k], mesh: m, placements: p, dtype });
  };
  return { op, placements, dtype, what, make };
}

async function valuesOf(t: dt.Tensor): Promise<number[]> {
  return Array.from((await t.data()) as Float64Array | Float32Array, Number);
}

/** `actual` (the distributed result) equals `expected` (one device's) within the op's tolerance. */
export async function expectLikeOneDevice(c: DrawnCase, actual: dt.Tensor, expected: dt.Tensor): Promise<void> {
  const what = c.what;
  expect(actual.shape, what).toEqual(expected.shape);
  expect(actual.dtype, what).toBe(expected.dtype);
  const [got, want] = [await valuesOf(actual), await valuesOf(expected)];
  expect(got.length, what).toBe(want.length);
  // a Partial result is reduced when read; the inputs are small integers, so its parts and
  // their sums are exact in every dtype (measured over 14 seeds): no looser bound for it
  const tolerance = c.op.tolerance;
  if (tolerance === 0) {
    expect(got, what).toEqual(want);
  } else {
    got.forEach((v, j) => {
      const w = want[j]!;
      if (Number.isNaN(w)) expect(v, `${what} at ${j}`).toBeNaN(); // e.g. the mean of an empty dim
      else expect(Math.abs(v - w), `${what} at ${j}`).toBeLessThanOrEqual(tolerance * Math.max(1, Math.abs(w)));
    });
  }
}

/**
 * Runs case `c` on `mesh` and on the one-device mesh `one` and checks that the results agree;
 * returns the error when the op refuses the placements at the call (its inputs then disposed).
 */
export async function expectCaseLikeOneDevice(c: DrawnCase, mesh: dt.DeviceMesh, one: dt.DeviceMesh): Promise<dt.DTorchError | undefined> {
  let expected: dt.Tensor;
  try {
    expected = dt.tidy(() => c.op.run(c.op.shapes.map((_, k) => c.make(k, one))));
  } catch (err) {
    throw new Error(`${c.what}: the single-device reference failed: ${(err as Error).message}`);
  }
  const inputs = c.op.shapes.map((_, k) => c.make(k, mesh, c.placements[k]));
  let actual: dt.Tensor;
  try {
    actual = c.op.run(inputs);
  } catch (err) {
    dt.dispose([inputs, expected]);
    return err as dt.DTorchError;
  }
  await expectLikeOneDevice(c, actual, expected);
  dt.dispose([inputs, expected, actual]);
  return undefined;
}
