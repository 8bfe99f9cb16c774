// The placement rows of matmul (native/core/operators/matmul.cpp) and linear (nn.cpp) as the
// einsum equations mk,kn->mn and ...k,nk,n->...n give them, pinned in the order the engine lists
// them (its error messages show that order, and a row with slices can shadow a later one):
// a dim of every operand and the output splits all of them alike; a dim of some operands and the
// output splits those, the others whole; a contracted dim splits the operands and leaves partial
// sums; a partial operand beside whole ones stays partial. Broadcast batch dims (size 1 against
// n) split only the operand that has them whole. tests/conformance/rows.test.ts runs every row
// and compares it with one device.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

const one = new dt.DeviceMesh('cpu', [0]);

// The rows the engine lists for the last op `run` records, as text: "(S(0), R) -> S(0)", with
// " |R0b10" where inputs may also be Replicate, sliced locally.
function rowsOf(shapes: number[][], run: (xs: dt.Tensor[]) => dt.Tensor): string[] {
  const e = engine() as unknown as { record: (c: number, i: number, a: number) => void; args: Float64Array };
  const inputs = shapes.map((s) => dt.zeros(s, { mesh: one }));
  const original = e.record;
  let last: { code: number; nIn: number; nAttr: number; args: number[] } | undefined;
  e.record = function (this: unknown, code: number, nIn: number, nAttr: number) {
    last = { code, nIn, nAttr, args: Array.from(e.args.subarray(0, nIn + nAttr)) };
    return original.call(e, code, nIn, nAttr);
  };
  try {
    run(inputs).dispose();
  } finally {
    e.record = original;
  }
  last!.args.forEach((v, i) => (e.args[i] = v));
  const rows = engine().signatureRows(last!.code, last!.nIn, last!.nAttr);
  dt.dispose(inputs);
  const p = (code: number) => String(dt.placementFromCode(code));
  return rows.map((r) => `(${r.inputs.map(p).join(', ')}) -> ${p(r.output)}${r.slice ? ` |R0b${r.slice.toString(2)}` : ''}`);
}

const matmul = ([a, b]: dt.Tensor[]) => a!.matmul(b!);
const linear = ([x, w, b]: dt.Tensor[]) => dt.F.linear(x!, w!, b);

describe('contraction rows', () => {
  it('matmul: mk,kn->mn and its batched, broadcast and 1-d forms', () => {
    const partials = ['(P(sum), R) -> P(sum)', '(R, P(sum)) -> P(sum)', '(P(avg), R) -> P(avg)', '(R, P(avg)) -> P(avg)'];
    const contracted = (a: number, b: number) => [`(S(${a}), S(${b})) -> P(sum)`, `(S(${a}), S(${b})) -> P(sum) |R0b10`, `(S(${a}), S(${b})) -> P(sum) |R0b1`];
    expect(rowsOf([[4, 3], [3, 5]], matmul)).toEqual(['(S(0), R) -> S(0)', '(R, S(1)) -> S(1)', ...contracted(1, 0), ...partials]);
    expect(rowsOf([[3], [3, 5]], matmul)).toEqual(['(R, S(1)) -> S(0)', ...contracted(0, 0), ...partials]);
    expect(rowsOf([[4, 3], [3]], matmul)).toEqual(['(S(0), R) -> S(0)', ...contracted(1, 0), ...partials]);
    expect(rowsOf([[3], [3]], matmul)).toEqual([...contracted(0, 0), ...partials]);
    const batch = ['(S(0), S(0)) -> S(0)', '(S(0), S(0)) -> S(0) |R0b10', '(S(0), S(0)) -> S(0) |R0b1'];
    expect(rowsOf([[2, 4, 3], [2, 3, 5]], matmul)).toEqual(['(S(1), R) -> S(1)', '(R, S(2)) -> S(2)', ...contracted(2, 1), ...partials, ...batch]);
    expect(rowsOf([[2, 4, 3], [3, 5]], matmul)).toEqual(['(S(1), R) -> S(1)', '(R, S(1)) -> S(2)', ...contracted(2, 0), ...partials, '(S(0), R) -> S(0)']);
    expect(rowsOf([[4, 3], [2, 3, 5]], matmul)).toEqual(['(S(0), R) -> S(1)', '(R, S(2)) -> S(2)', ...contracted(1, 1), ...partials, '(R, S(0)) -> S(0)']);
    expect(rowsOf([[1, 4, 3], [2, 3, 5]], matmul)).toEqual(['(S(1), R) -> S(1)', '(R, S(2)) -> S(2)', ...contracted(2, 1), ...partials, '(R, S(0)) -> S(0)']);
    expect(rowsOf([[2, 1, 4, 3], [3, 3, 5]], matmul)).toEqual([
      '(S(2), R) -> S(2)', '(R, S(2)) -> S(3)', ...contracted(3, 1), ...partials, '(S(0), R) -> S(0)', '(R, S(0)) -> S(1)',
    ]);
  });

  it('linear: ...k,nk(,n)->...n', () => {
    expect(rowsOf([[4, 3], [5, 3], [5]], linear)).toEqual([
      '(S(0), R, R) -> S(0)', '(R, S(0), S(0)) -> S(1) |R0b110', '(S(1), S(1), P(sum)) -> P(sum) |R0b11', '(P(sum), R, P(sum)) -> P(sum)', '(R, P(sum), P(sum)) -> P(sum)',
    ]);
    expect(rowsOf([[2, 4, 3], [5, 3]], linear)).toEqual([
      '(S(0), R) -> S(0)', '(S(1), R) -> S(1)', '(R, S(0)) -> S(2) |R0b10', '(S(2), S(1)) -> P(sum) |R0b11', '(P(sum), R) -> P(sum)', '(R, P(sum)) -> P(sum)',
    ]);
  });
});
