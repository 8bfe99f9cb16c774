// Elementwise ops: unary, binary with broadcasting and PyTorch type promotion, where and
// maskedFill (the activations, dt.F's too, are in activation.ts). A JS number acts as a Python
// scalar: an integral number (inside int64) as an int, any other as a float, a boolean as a bool
// (scalar.ts).
import { DTorchError, ErrorCode, checkKnownOptions, checkNumber, invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { isFloatingDtype, type DType } from '../dtype.js';
import { Replicate } from '../placement.js';
import { checkTensor as checkInput, output, recordOp, recordUnary } from '../record.js';
import { ScalarKind, checkFits, scalarKindOf } from '../scalar.js';
import { atomic } from '../scope.js';
import { full } from './creation.js';
import { Tensor, type Scalar } from '../tensor.js';

const checkTensor = (fn: string, x: unknown): Tensor => checkInput(`${fn} input`, x);

/**
 * -x, as torch.neg; same dtype (bool refused). Partial(sum/avg) stays partial.
 * @see {@link Tensor.neg}
 */
export const neg = (x: Tensor): Tensor => recordUnary('neg', x);
/**
 * |x|, as torch.abs; same dtype (bool refused).
 * @see {@link Tensor.abs}
 */
export const abs = (x: Tensor): Tensor => recordUnary('abs', x);
/**
 * x * x, as torch.square; same dtype, bool giving int64.
 * @see {@link Tensor.square}
 */
export const square = (x: Tensor): Tensor => recordUnary('square', x);
/**
 * Rounds down, as torch.floor; same dtype (bool refused).
 * @see {@link Tensor.floor}
 */
export const floor = (x: Tensor): Tensor => recordUnary('floor', x);
/**
 * Rounds half to even, as torch.round.
 * @see {@link Tensor.round}
 */
export const round = (x: Tensor): Tensor => recordUnary('round', x);
/**
 * e^x, as torch.exp; integer and bool inputs give float32.
 * @see {@link Tensor.exp}
 */
export const exp = (x: Tensor): Tensor => recordUnary('exp', x);
/**
 * Natural logarithm, as torch.log; integer and bool inputs give float32.
 * @see {@link Tensor.log}
 */
export const log = (x: Tensor): Tensor => recordUnary('log', x);
/**
 * Base-2 logarithm, as torch.log2; integer and bool inputs give float32.
 * @see {@link Tensor.log2}
 */
export const log2 = (x: Tensor): Tensor => recordUnary('log2', x);
/**
 * Square root, as torch.sqrt; integer and bool inputs give float32.
 * @see {@link Tensor.sqrt}
 */
export const sqrt = (x: Tensor): Tensor => recordUnary('sqrt', x);
/**
 * 1 / sqrt(x), as torch.rsqrt; integer and bool inputs give float32.
 * @see {@link Tensor.rsqrt}
 */
export const rsqrt = (x: Tensor): Tensor => recordUnary('rsqrt', x);
/**
 * 1 / x, as torch.reciprocal; integer and bool inputs give float32.
 * @see {@link Tensor.reciprocal}
 */
export const reciprocal = (x: Tensor): Tensor => recordUnary('reciprocal', x);
/**
 * Sine (radians), as torch.sin; integer and bool inputs give float32.
 * @see {@link Tensor.sin}
 */
export const sin = (x: Tensor): Tensor => recordUnary('sin', x);
/**
 * Cosine (radians), as torch.cos; integer and bool inputs give float32.
 * @see {@link Tensor.cos}
 */
export const cos = (x: Tensor): Tensor => recordUnary('cos', x);
/**
 * Whether each element is NaN: a bool tensor, as torch.isnan.
 * @see {@link Tensor.isnan}
 */
export const isnan = (x: Tensor): Tensor => recordUnary('isnan', x);
/**
 * Whether each element is +inf or -inf: a bool tensor, as torch.isinf.
 * @see {@link Tensor.isinf}
 */
export const isinf = (x: Tensor): Tensor => recordUnary('isinf', x);
/**
 * Logical not (zero is false): a bool tensor, as torch.logical_not.
 * @see {@link Tensor.logicalNot}
 */
export const logicalNot = (x: Tensor): Tensor => recordUnary('logical_not', x);

/**
 * Clamps into [min, max]; either bound may be left out (null or undefined). As torch.clamp, a
 * fractional bound makes an integer tensor's result float32, and a bound the result dtype
 * cannot hold is refused.
 * @see {@link Tensor.clamp}
 */
export function clamp(x: Tensor, min?: number | null, max?: number | null): Tensor {
  checkTensor('clamp', x);
  const has = (v: unknown) => v !== undefined && v !== null;
  if (has(min)) checkNumber('clamp min', min);
  if (has(max)) checkNumber('clamp max', max);
  if (!has(min) && !has(max)) throw new DTorchError(ErrorCode.InvalidArgument, 'clamp: give at least one of min and max');
  const bounds = [min, max].filter(has) as number[];
  const dtype: DType = !isFloatingDtype(x.dtype) && bounds.some((b) => scalarKindOf(b) === ScalarKind.Float) ? 'float32' : x.dtype;
  if (has(min)) checkFits('clamp min', min!, dtype);
  if (has(max)) checkFits('clamp max', max!, dtype);
  return recordUnary('clamp', x, [has(min) ? 1 : 0, min ?? 0, has(max) ? 1 : 0, max ?? 0]);
}

// ---- binary ----------------------------------------------------------------------------------

type BinaryName =
  | 'add' | 'sub' | 'mul' | 'div' | 'pow' | 'minimum' | 'maximum'
  | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge' | 'logical_and' | 'logical_or';

// scalar (op) tensor as tensor (op') scalar, where such an op' exists
const withScalarFirst: Partial<Record<BinaryName, BinaryName>> = {
  add: 'add', mul: 'mul', minimum: 'minimum', maximum: 'maximum', eq: 'eq', ne: 'ne',
  lt: 'gt', le: 'ge', gt: 'lt', ge: 'le', logical_and: 'logical_and', logical_or: 'logical_or',
};

function scalarKind(name: string, value: unknown): ScalarKind {
  if (typeof value !== 'number' && typeof value !== 'boolean') throw invalidParameter(`${name} operand`, 'Tensor, number or boolean', value);
  return scalarKindOf(value);
}

// alpha is a number; whether it suits the operands' dtype (an integer for integer results) is
// known at record time, where the native infer checks it
function checkAlpha(name: string, alpha: unknown): number {
  if (alpha === undefined) return 1;
  if (typeof alpha !== 'number') throw invalidParameter(`${name} alpha`, 'number', alpha);
  return alpha;
}

// A JS scalar as a 0-d Replicate tensor on `like`'s mesh, typed as PyTorch types a Python scalar.
function scalarTensor(value: Scalar, like: Tensor): Tensor {
  // a JS number is an int64 only where int64 holds it: -3.4e38 (float32's lowest, an "integer"
  // to JS) is a float, as the Python float it stands for
  const kind = scalarKindOf(value);
  const dtype = kind === ScalarKind.Bool ? 'bool' : kind === ScalarKind.Int ? 'int64' : 'float32';
  return full([], value, { dtype, mesh: like.mesh, placements: like.placements.map(() => Replicate()) });
}

const ALPHA_OPTIONS = ['alpha'] as const;

// Each binary op's codes (tensor-tensor, tensor-scalar), looked up once: building
// `${name}_scalar` and finding it on every call is a tenth of recording an op.
const binaryCodes = new Map<BinaryName, { tensor: number; scalar: number }>();
function binaryCodesOf(name: BinaryName): { tensor: number; scalar: number } {
  let codes = binaryCodes.get(name);
  if (!codes) {
    const e = engine();
    binaryCodes.set(name, (codes = { tensor: e.opCode(name), scalar: e.opCode(`${name}_scalar`) }));
  }
  return codes;
}

function binary(name: BinaryName, a: Tensor | Scalar, b: Tensor | Scalar, alphaOption?: unknown): Tensor {
  const alpha = checkAlpha(name, alphaOption);
  const e = engine();
  const args = e.args;
  if (a instanceof Tensor && b instanceof Tensor) {
    args[0] = a.id;
    args[1] = b.id;
    args[2] = alpha;
    e.record(binaryCodesOf(name).tensor, 2, 1);
    return output(a.mesh);
  }
  if (a instanceof Tensor) {
    const kind = scalarKind(name, b);
    args[0] = a.id;
    args[1] = Number(b);
    args[2] = kind;
    args[3] = alpha;
    e.record(binaryCodesOf(name).scalar, 1, 3);
    return output(a.mesh);
  }
  if (b instanceof Tensor) {
    scalarKind(name, a);
    const swapped = withScalarFirst[name];
    if (swapped && alpha === 1) return binary(swapped, b, a);
    return atomic(() => {
      const lhs = scalarTensor(a, b);
      const result = binary(name, lhs, b, alpha);
      lhs.dispose();
      return result;
    });
  }
  throw new DTorchError(ErrorCode.InvalidArgument, `${name}: expected at least one Tensor operand but received ${typeof a} and ${typeof b}`);
}

/**
 * An operand of a binary op: a tensor, or a JS number or boolean taken as a Python scalar (an
 * integral number inside int64 as an int, any other number as a float, a boolean as a bool).
 */
export type Operand = Tensor | Scalar;
// alpha from add/sub's options (none on the hot path: x.add(1))
const alphaOf = (name: string, options: unknown): unknown =>
  options === undefined ? undefined : checkKnownOptions<{ alpha: number }>(`${name} options`, options, ALPHA_OPTIONS).alpha;

/**
 * a + alpha * other, broadcast, with PyTorch type promotion, as torch.add (alpha default 1).
 * Shards pass through (a Replicate operand beside a Shard is sliced locally); Partial(sum/avg)
 * plus the same Partial stays partial.
 * @see {@link Tensor.add}
 */
export const add = (a: Operand, other: Operand, options?: { alpha?: number }): Tensor => binary('add', a, other, alphaOf('add', options));
/**
 * a - alpha * other, broadcast, as torch.sub (alpha default 1); Partial minus Partial stays
 * partial, bool operands are refused.
 * @see {@link Tensor.sub}
 */
export const sub = (a: Operand, other: Operand, options?: { alpha?: number }): Tensor => binary('sub', a, other, alphaOf('sub', options));
/**
 * a * other, broadcast, with PyTorch type promotion, as torch.mul. A Partial(sum/avg) operand
 * times a Replicate one or a scalar stays partial.
 * @see {@link Tensor.mul}
 */
export const mul = (a: Operand, other: Operand): Tensor => binary('mul', a, other);
/**
 * True division: integer operands give float32.
 * @see {@link Tensor.div}
 */
export const div = (a: Operand, other: Operand): Tensor => binary('div', a, other);
/**
 * a to the power `exponent`, broadcast, as torch.pow; integers to negative integer powers and
 * bool tensors are refused.
 * @see {@link Tensor.pow}
 */
export const pow = (a: Operand, exponent: Operand): Tensor => binary('pow', a, exponent);
/**
 * Elementwise minimum, broadcast, as torch.minimum (NaN wins).
 * @see {@link Tensor.minimum}
 */
export const minimum = (a: Operand, other: Operand): Tensor => binary('minimum', a, other);
/**
 * Elementwise maximum, broadcast, as torch.maximum (NaN wins).
 * @see {@link Tensor.maximum}
 */
export const maximum = (a: Operand, other: Operand): Tensor => binary('maximum', a, other);
/**
 * a == other, broadcast: a bool tensor, as torch.eq.
 * @see {@link Tensor.eq}
 */
export const eq = (a: Operand, other: Operand): Tensor => binary('eq', a, other);
/**
 * a != other, broadcast: a bool tensor, as torch.ne.
 * @see {@link Tensor.ne}
 */
export const ne = (a: Operand, other: Operand): Tensor => binary('ne', a, other);
/**
 * a < other, broadcast: a bool tensor, as torch.lt.
 * @see {@link Tensor.lt}
 */
export const lt = (a: Operand, other: Operand): Tensor => binary('lt', a, other);
/**
 * a <= other, broadcast: a bool tensor, as torch.le.
 * @see {@link Tensor.le}
 */
export const le = (a: Operand, other: Operand): Tensor => binary('le', a, other);
/**
 * a > other, broadcast: a bool tensor, as torch.gt.
 * @see {@link Tensor.gt}
 */
export const gt = (a: Operand, other: Operand): Tensor => binary('gt', a, other);
/**
 * a >= other, broadcast: a bool tensor, as torch.ge.
 * @see {@link Tensor.ge}
 */
export const ge = (a: Operand, other: Operand): Tensor => binary('ge', a, other);
/**
 * a and other (zero is false), broadcast: a bool tensor, as torch.logical_and.
 * @see {@link Tensor.logicalAnd}
 */
export const logicalAnd = (a: Operand, other: Operand): Tensor => binary('logical_and', a, other);
/**
 * a or other (zero is false), broadcast: a bool tensor, as torch.logical_or.
 * @see {@link Tensor.logicalOr}
 */
export const logicalOr = (a: Operand, other: Operand): Tensor => binary('logical_or', a, other);

// PyTorch's result_type(tensor, scalar): the tensor's dtype, unless the scalar is of a higher
// category (bool < int < float), which then gives its default (int64, float32).
function resultWithScalar(t: Tensor, kind: ScalarKind): DType {
  const category = (d: DType) => (d === 'bool' ? 0 : isFloatingDtype(d) ? 2 : 1);
  const scalarCategory = kind === ScalarKind.Bool ? 0 : kind === ScalarKind.Int ? 1 : 2;
  if (scalarCategory <= category(t.dtype)) return t.dtype;
  return scalarCategory === 1 ? 'int64' : 'float32';
}

/**
 * Elements of `a` where the bool `condition` holds, else of `b` (all three broadcast), as
 * torch.where; a scalar beside a tensor must fit the result's dtype.
 * @see {@link Tensor.where}
 */
export function where(condition: Tensor, a: Operand, b: Operand): Tensor {
  checkTensor('where condition', condition);
  for (const v of [a, b]) if (!(v instanceof Tensor)) scalarKind('where', v);
  // a scalar beside a tensor must fit the result's dtype (torch.where(c, uint8, -256) raises)
  const [t, other] = a instanceof Tensor ? [a, b] : [b instanceof Tensor ? b : undefined, a];
  if (t && !(other instanceof Tensor)) checkFits('where scalar', other, resultWithScalar(t, scalarKindOf(other)));
  return atomic(() => {
    const temporaries: Tensor[] = [];
    const asTensor = (v: Operand): Tensor => {
      if (v instanceof Tensor) return v;
      const t = scalarTensor(v, condition);
      temporaries.push(t);
      return t;
    };
    const result = recordOp('where', [condition, asTensor(a), asTensor(b)], []);
    for (const t of temporaries) t.dispose();
    return result;
  });
}

/**
 * `x` with `value` where `mask` (broadcast to x's shape) holds; a value x's dtype cannot hold is
 * refused.
 * @see {@link Tensor.maskedFill}
 */
export function maskedFill(x: Tensor, mask: Tensor, value: Scalar): Tensor {
  checkTensor('maskedFill', x);
  checkTensor('maskedFill mask', mask);
  const kind = scalarKind('maskedFill value', value);
  return recordOp('masked_fill', [x, mask], [checkFits('maskedFill value', value, x.dtype), kind]);
}
