// Every signature row the engine lists for each primitive op: the rows are read from the engine
// for each case's inputs, then the op runs with its inputs placed as each row says (and with
// Replicate where a row accepts it, sliced locally) on meshes of 2, 3 (uneven) and 2x2 CPU
// devices, and must equal the single-device result in shape, dtype and length, and in value:
// exactly, or within 1e-5 relative where a reduction over devices (a Partial result, a sharded
// contraction) reorders float sums. Rows come from the engine, so a missing row passes here:
// tests/distributed/placement_oracle.test.ts finds those from the math.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

interface InputSpec {
  shape: number[];
  dtype?: dt.DType;
  /** 'ids' in [0, max), 'bool' from the sign, default small integers as floats */
  kind?: 'ids' | 'bool';
  max?: number;
}
interface RowCase {
  name: string;
  inputs: InputSpec[];
  run: (x: dt.Tensor[]) => dt.Tensor;
}

const f = (...shape: number[]): InputSpec => ({ shape });
const cases: RowCase[] = [
  { name: 'neg', inputs: [f(5, 3)], run: ([x]) => x!.neg() },
  { name: 'exp', inputs: [f(5, 3)], run: ([x]) => x!.div(10).exp() },
  { name: 'gelu', inputs: [f(3, 5)], run: ([x]) => dt.F.gelu(x!, { approximate: 'tanh' }) },
  { name: 'clamp', inputs: [f(5, 3)], run: ([x]) => x!.clamp(-2, 3) },
  { name: 'add broadcast', inputs: [f(4, 5), f(5)], run: ([a, b]) => a!.add(b!, { alpha: 2 }) },
  { name: 'mul', inputs: [f(4, 5), f(4, 5)], run: ([a, b]) => a!.mul(b!) },
  { name: 'div', inputs: [f(4, 5), f(1, 5)], run: ([a, b]) => a!.div(b!.abs().add(1)) },
  { name: 'mul scalar', inputs: [f(6, 2)], run: ([a]) => a!.mul(-1.5) },
  { name: 'gt', inputs: [f(3, 4), f(3, 1)], run: ([a, b]) => a!.gt(b!) },
  { name: 'where', inputs: [{ shape: [4, 3], kind: 'bool' }, f(4, 3), f(3)], run: ([c, a, b]) => dt.where(c!, a!, b!) },
  { name: 'maskedFill', inputs: [f(4, 3), { shape: [3], kind: 'bool' }], run: ([x, m]) => x!.maskedFill(m!, 7) },
  { name: 'matmul', inputs: [f(5, 4), f(4, 3)], run: ([a, b]) => a!.matmul(b!) },
  { name: 'matmul batched', inputs: [f(2, 5, 4), f(2, 4, 3)], run: ([a, b]) => a!.matmul(b!) },
  { name: 'matmul vector', inputs: [f(5, 4), f(4)], run: ([a, b]) => a!.matmul(b!) },
  { name: 'sum dim', inputs: [f(5, 4, 3)], run: ([x]) => x!.sum(1) },
  { name: 'mean keepdim', inputs: [f(5, 4)], run: ([x]) => x!.mean(0, true) },
  { name: 'max all', inputs: [f(5, 4)], run: ([x]) => x!.max() },
  { name: 'max dim', inputs: [f(5, 4)], run: ([x]) => x!.max(1).values },
  { name: 'argmax dim', inputs: [f(5, 4)], run: ([x]) => x!.argmax(0) },
  { name: 'any', inputs: [{ shape: [5, 4], kind: 'bool' }], run: ([x]) => x!.any(0) },
  { name: 'softmax', inputs: [f(5, 4)], run: ([x]) => x!.div(10).softmax(-1) },
  { name: 'to', inputs: [f(5, 3)], run: ([x]) => x!.to('int32') },
  { name: 'reshape split', inputs: [f(6, 5)], run: ([x]) => x!.reshape([6, 5, 1]) },
  { name: 'reshape merge', inputs: [f(6, 2, 5)], run: ([x]) => x!.reshape([12, 5]) },
  { name: 'permute', inputs: [f(2, 3, 5)], run: ([x]) => x!.permute([2, 0, 1]) },
  { name: 'expand', inputs: [f(5, 1)], run: ([x]) => x!.expand([5, 3]) },
  { name: 'cat', inputs: [f(5, 2), f(5, 3)], run: ([a, b]) => dt.cat([a!, b!], 1) },
  { name: 'split', inputs: [f(5, 6)], run: ([x]) => x!.split(4, 1)[1]! },
  { name: 'slice', inputs: [f(5, 6)], run: ([x]) => dt.sliceAlong(x!, 1, 1, 6, 2) },
  { name: 'indexSelect', inputs: [f(5, 6), { shape: [4], kind: 'ids', max: 6 }], run: ([x, i]) => x!.indexSelect(1, i!) },
  { name: 'repeat', inputs: [f(5, 2)], run: ([x]) => x!.repeat(1, 3) },
  { name: 'pad', inputs: [f(5, 3)], run: ([x]) => dt.F.pad(x!, [1, 2]) },
  { name: 'linear', inputs: [f(5, 4), f(3, 4), f(3)], run: ([x, w, b]) => dt.F.linear(x!, w!, b) },
  { name: 'linear no bias', inputs: [f(2, 5, 4), f(3, 4)], run: ([x, w]) => dt.F.linear(x!, w!) },
  { name: 'layerNorm', inputs: [f(5, 3, 4), f(4), f(4)], run: ([x, w, b]) => dt.F.layerNorm(x!, [4], { weight: w, bias: b }) },
  { name: 'rmsNorm', inputs: [f(5, 4), f(4)], run: ([x, w]) => dt.F.rmsNorm(x!, [4], { weight: w }) },
  { name: 'groupNorm', inputs: [f(5, 4, 2, 2)], run: ([x]) => dt.F.groupNorm(x!, 2) },
  { name: 'embedding', inputs: [{ shape: [5, 3], kind: 'ids', max: 7 }, f(7, 4)], run: ([i, w]) => dt.F.embedding(i!, w!) },
  { name: 'sdpa', inputs: [f(5, 2, 6, 4), f(5, 2, 6, 4), f(5, 2, 6, 4)], run: ([q, k, v]) => dt.F.scaledDotProductAttention(q!.div(10), k!.div(10), v!) },
  { name: 'sdpa heads', inputs: [f(5, 6, 8), f(5, 6, 8), f(5, 6, 8)], run: ([q, k, v]) => dt.F.scaledDotProductAttention(q!.div(10), k!.div(10), v!, { heads: 2 }) },
  { name: 'conv2d', inputs: [f(5, 2, 4, 4), f(3, 2, 3, 3)], run: ([x, w]) => dt.F.conv2d(x!, w!, undefined, { padding: 1 }) },
  { name: 'interpolate', inputs: [f(5, 3, 2, 2)], run: ([x]) => dt.F.interpolate(x!, { scaleFactor: 2, mode: 'bilinear' }) },
  { name: 'maxPool2d', inputs: [f(5, 3, 4, 4)], run: ([x]) => dt.F.maxPool2d(x!, 2) },
];

function values(spec: InputSpec, seed: number): (number | boolean)[] {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, (_, i) => {
    const v = ((i * 7919 + seed * 104729) % 41) - 20;
    return spec.kind === 'bool' ? v > 0 : spec.kind === 'ids' ? Math.abs(v) % spec.max! : v;
  });
}
function make(spec: InputSpec, seed: number, mesh: dt.DeviceMesh, placements?: dt.Placement[]): dt.Tensor {
  const dtype = spec.kind === 'ids' ? 'int64' : spec.kind === 'bool' ? 'bool' : spec.dtype;
  return dt.tensor(values(spec, seed) as number[], { shape: spec.shape, dtype, mesh, placements });
}

// The code, inputs and attributes of the last node the op records (its primitive).
function captureLastRecord(run: () => dt.Tensor): { code: number; nIn: number; nAttr: number; args: number[] } {
  const e = engine() as unknown as { record: (c: number, i: number, a: number) => void; args: Float64Array };
  const original = e.record;
  let captured: { code: number; nIn: number; nAttr: number; args: number[] } | undefined;
  e.record = function (this: unknown, code: number, nIn: number, nAttr: number) {
    captured = { code, nIn, nAttr, args: Array.from(e.args.subarray(0, nIn + nAttr)) };
    return original.call(e, code, nIn, nAttr);
  };
  try {
    run().dispose();
  } finally {
    e.record = original;
  }
  return captured!;
}

async function valuesOf(t: dt.Tensor): Promise<number[]> {
  return Array.from((await t.data()) as Float32Array, Number);
}

describe.each([
  { name: 'cpu x2', mesh: () => new dt.DeviceMesh('cpu', [0, 1]) },
  { name: 'cpu x3 (uneven)', mesh: () => new dt.DeviceMesh('cpu', [0, 1, 2]) },
  { name: 'cpu 2x2', mesh: () => dt.initDeviceMesh('cpu', [2, 2]) },
])('every signature row on $name', ({ mesh: makeMesh }) => {
  it(`runs each row of ${cases.length} ops and equals one device`, async () => {
    const mesh = makeMesh();
    const one = new dt.DeviceMesh('cpu', [0]);
    let rowsRun = 0;
    for (const c of cases) {
      const reference = c.run(c.inputs.map((s, k) => make(s, k, one)));
      const want = await valuesOf(reference);
      // the rows, read for Replicate inputs on this mesh (what the primitive sees)
      const replicated = c.inputs.map((s, k) => make(s, k, mesh));
      const last = captureLastRecord(() => c.run(replicated));
      const e = engine();
      last.args.forEach((v, i) => (e.args[i] = v));
      const rows = e.signatureRows(last.code, last.nIn, last.nAttr);
      expect(rows.length, c.name).toBeGreaterThan(0);
      for (const row of rows) {
        // this row on one mesh dim, Replicate on the others; also with each sliceable input Replicate
        // each sliceable input Replicate on its own, while another input keeps the row's shard
        const sharded = row.inputs.map((p) => !dt.placementFromCode(p).isReplicate());
        const variants = [0];
        row.inputs.forEach((_, k) => {
          if (row.slice & (1 << k) && sharded.some((s, j) => s && j !== k)) variants.push(1 << k);
        });
        for (const meshDim of mesh.shape.map((_, d) => d)) {
          for (const asReplicate of variants) {
            const placementsOf = (k: number) =>
              mesh.shape.map((_, d) => (d === meshDim && !(asReplicate & (1 << k)) ? dt.placementFromCode(row.inputs[k]!) : dt.Replicate()));
            const what = `${c.name}: row (${row.inputs.map((p) => String(dt.placementFromCode(p)))}) -> ${dt.placementFromCode(row.output)} on mesh dim ${meshDim}${asReplicate ? ' with Replicate inputs sliced' : ''}`;
            // a row's primitive inputs are the case's inputs, except where the case computes them
            if (last.nIn !== c.inputs.length) continue;
            const inputs = c.inputs.map((s, k) => make(s, k, mesh, placementsOf(k)));
            let out: dt.Tensor;
            try {
              out = c.run(inputs);
            } catch (err) {
              throw new Error(`${what}: ${(err as Error).message}`);
            }
            expect(String(out.placements[meshDim]), what).toBe(String(dt.placementFromCode(row.output)));
            expect(out.shape, what).toEqual(reference.shape);
            expect(out.dtype, what).toBe(reference.dtype);
            const got = await valuesOf(out);
            // the length first: a short or empty read must not pass an element-wise check
            expect(got.length, what).toBe(want.length);
            const exact = !out.placements.some((p) => p.isPartial()) && !['matmul', 'linear', 'sdpa', 'conv2d'].some((n) => c.name.startsWith(n));
            if (exact) expect(got, what).toEqual(want);
            else {
              const far = got.findIndex((v, i) => !(Math.abs(v - want[i]!) <= 1e-5 * Math.max(1, Math.abs(want[i]!))));
              if (far >= 0) expect.fail(`${what}: ${got[far]} at ${far}, one device gives ${want[far]}`);
            }
            dt.dispose([inputs, out]);
            rowsRun++;
          }
        }
      }
      dt.dispose([reference, replicated]);
    }
    expect(rowsRun).toBeGreaterThan(100);
  });
});

// The placement rows of matmul and linear, derived from their einsum equations
// (native/core/operators/contraction_rows.cpp), pinned in the order the engine lists them (its
// error messages show that order, and a row with slices can shadow a later one): a letter of the
// output splits the operands that have it whole, a contracted letter splits its operands into
// partial sums, a partial operand beside whole ones stays partial, and a bias follows the output.
// The test above runs each of these rows.

// The rows the engine lists for the last op `run` records, as text: "(S(0), R) -> S(0)", with
// " |R0b10" where inputs may also be Replicate, sliced locally.
function rowsOf(shapes: number[][], run: (xs: dt.Tensor[]) => dt.Tensor): string[] {
  const one = new dt.DeviceMesh('cpu', [0]);
  const inputs = shapes.map((s) => dt.zeros(s, { mesh: one }));
  const last = captureLastRecord(() => run(inputs));
  const e = engine();
  last.args.forEach((v, i) => (e.args[i] = v));
  const rows = e.signatureRows(last.code, last.nIn, last.nAttr);
  dt.dispose(inputs);
  const p = (code: number) => String(dt.placementFromCode(code));
  return rows.map((r) => `(${r.inputs.map(p).join(', ')}) -> ${p(r.output)}${r.slice ? ` |R0b${r.slice.toString(2)}` : ''}`);
}

const matmul = ([a, b]: dt.Tensor[]) => a!.matmul(b!);
const linear = ([x, w, b]: dt.Tensor[]) => dt.F.linear(x!, w!, b);

describe('contraction rows', () => {
  const twoPartials = ['(P(sum), R) -> P(sum)', '(R, P(sum)) -> P(sum)', '(P(avg), R) -> P(avg)', '(R, P(avg)) -> P(avg)'];

  it('matmul: ...mk,...kn->...mn with 1-d operands and broadcast batch dims', () => {
    const k = (a: number, b: number) => `(S(${a}), S(${b})) -> P(sum) |R0b11`;
    expect(rowsOf([[4, 3], [3, 5]], matmul)).toEqual(['(S(0), R) -> S(0)', '(R, S(1)) -> S(1)', k(1, 0), ...twoPartials]);
    expect(rowsOf([[3], [3, 5]], matmul)).toEqual(['(R, S(1)) -> S(0)', k(0, 0), ...twoPartials]);
    expect(rowsOf([[4, 3], [3]], matmul)).toEqual(['(S(0), R) -> S(0)', k(1, 0), ...twoPartials]);
    expect(rowsOf([[3], [3]], matmul)).toEqual([k(0, 0), ...twoPartials]);
    expect(rowsOf([[2, 4, 3], [2, 3, 5]], matmul)).toEqual(['(S(0), S(0)) -> S(0) |R0b11', '(S(1), R) -> S(1)', '(R, S(2)) -> S(2)', k(2, 1), ...twoPartials]);
    expect(rowsOf([[2, 4, 3], [3, 5]], matmul)).toEqual(['(S(0), R) -> S(0)', '(S(1), R) -> S(1)', '(R, S(1)) -> S(2)', k(2, 0), ...twoPartials]);
    expect(rowsOf([[4, 3], [2, 3, 5]], matmul)).toEqual(['(R, S(0)) -> S(0)', '(S(0), R) -> S(1)', '(R, S(2)) -> S(2)', k(1, 1), ...twoPartials]);
    // a batch dim of 1 against 2 splits only the operand that has it whole
    expect(rowsOf([[1, 4, 3], [2, 3, 5]], matmul)).toEqual(['(R, S(0)) -> S(0)', '(S(1), R) -> S(1)', '(R, S(2)) -> S(2)', k(2, 1), ...twoPartials]);
    expect(rowsOf([[2, 1, 4, 3], [3, 3, 5]], matmul)).toEqual([
      '(S(0), R) -> S(0)', '(R, S(0)) -> S(1)', '(S(2), R) -> S(2)', '(R, S(2)) -> S(3)', k(3, 1), ...twoPartials,
    ]);
  });

  it('linear: ...k,nk->...n, the bias [n] added', () => {
    expect(rowsOf([[4, 3], [5, 3], [5]], linear)).toEqual([
      '(S(0), R, R) -> S(0)', '(R, S(0), S(0)) -> S(1) |R0b110', '(S(1), S(1), P(sum)) -> P(sum) |R0b11',
      '(P(sum), R, P(sum)) -> P(sum)', '(R, P(sum), P(sum)) -> P(sum)', '(P(avg), R, P(avg)) -> P(avg)', '(R, P(avg), P(avg)) -> P(avg)',
    ]);
    expect(rowsOf([[2, 4, 3], [5, 3]], linear)).toEqual(['(S(0), R) -> S(0)', '(S(1), R) -> S(1)', '(R, S(0)) -> S(2)', '(S(2), S(1)) -> P(sum) |R0b11', ...twoPartials]);
  });
});
