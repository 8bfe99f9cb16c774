// Elementwise ops: unary, and binary with broadcasting, PyTorch type promotion and JS numbers
// (an integral number acts as a Python int, any other as a float, a boolean as a bool).
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { Replicate } from '../placement.js';
import { output } from '../record.js';
import { full } from './creation.js';
import { Tensor, type Scalar } from '../tensor.js';

function unary(name: string, x: Tensor): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter(`${name} input`, 'Tensor', x);
  const e = engine();
  e.args[0] = x.id;
  e.record(e.ops[name]!.code, 1, 0);
  return output(x.mesh);
}

export const neg = (x: Tensor): Tensor => unary('neg', x);
export const abs = (x: Tensor): Tensor => unary('abs', x);
export const relu = (x: Tensor): Tensor => unary('relu', x);
export const exp = (x: Tensor): Tensor => unary('exp', x);
export const log = (x: Tensor): Tensor => unary('log', x);
export const sqrt = (x: Tensor): Tensor => unary('sqrt', x);
export const sigmoid = (x: Tensor): Tensor => unary('sigmoid', x);
export const tanh = (x: Tensor): Tensor => unary('tanh', x);

type BinaryName = 'add' | 'sub' | 'mul' | 'div';
const commutative: Record<BinaryName, boolean> = { add: true, sub: false, mul: true, div: false };

function scalarKind(name: string, value: Scalar): number {
  if (typeof value === 'boolean') return 2;
  if (typeof value !== 'number') throw invalidParameter(`${name} operand`, 'Tensor, number or boolean', value);
  return Number.isInteger(value) ? 0 : 1;
}

function checkAlpha(name: string, alpha: unknown): number {
  if (alpha === undefined) return 1;
  if (typeof alpha !== 'number') throw invalidParameter(`${name} alpha`, 'number', alpha);
  return alpha;
}

/** A JS scalar as a 0-d tensor on `like`'s mesh, typed as PyTorch types a Python scalar. */
function scalarTensor(value: Scalar, like: Tensor): Tensor {
  const dtype = typeof value === 'boolean' ? 'bool' : Number.isInteger(value) ? 'int64' : 'float32';
  return full([], value, { dtype, mesh: like.mesh, placements: like.placements.map(() => Replicate()) });
}

function binary(name: BinaryName, a: Tensor | Scalar, b: Tensor | Scalar, alphaOption?: unknown): Tensor {
  const alpha = checkAlpha(name, alphaOption);
  const e = engine();
  const args = e.args;
  if (a instanceof Tensor && b instanceof Tensor) {
    args[0] = a.id;
    args[1] = b.id;
    args[2] = alpha;
    e.record(e.ops[name]!.code, 2, 1);
    return output(a.mesh);
  }
  if (a instanceof Tensor) {
    const kind = scalarKind(name, b as Scalar);
    args[0] = a.id;
    args[1] = Number(b);
    args[2] = kind;
    args[3] = alpha;
    e.record(e.ops[`${name}_scalar`]!.code, 1, 3);
    return output(a.mesh);
  }
  if (b instanceof Tensor) {
    scalarKind(name, a);
    if (commutative[name] && alpha === 1) return binary(name, b, a);
    const lhs = scalarTensor(a, b);
    const result = binary(name, lhs, b, alpha);
    lhs.dispose();
    return result;
  }
  throw new DTorchError(ErrorCode.InvalidArgument, `${name}: expected at least one Tensor operand but received ${typeof a} and ${typeof b}`);
}

export const add = (a: Tensor | Scalar, b: Tensor | Scalar, options?: { alpha?: number }): Tensor => binary('add', a, b, options?.alpha);
export const sub = (a: Tensor | Scalar, b: Tensor | Scalar, options?: { alpha?: number }): Tensor => binary('sub', a, b, options?.alpha);
export const mul = (a: Tensor | Scalar, b: Tensor | Scalar): Tensor => binary('mul', a, b);
export const div = (a: Tensor | Scalar, b: Tensor | Scalar): Tensor => binary('div', a, b);
