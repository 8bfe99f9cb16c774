// JS numbers as the Python scalars PyTorch sees: an integral number in int64's range is an
// int, any other number a float, a boolean a bool. And whether such a scalar fits a dtype,
// refused where PyTorch refuses it (its checked conversion, c10::checked_convert), so that a
// value the kernel would refuse fails at the call, and one that would wrap silently never
// reaches native code.
import { invalidParameter } from '@dtorch/common';
import type { DType } from './dtype.js';

const TWO_63 = 2 ** 63;

/** Scalar kinds as the engine reads them (native ScalarKind): 0 int, 1 float, 2 bool. */
export const ScalarKind = { Int: 0, Float: 1, Bool: 2 } as const;
export type ScalarKind = (typeof ScalarKind)[keyof typeof ScalarKind];

/** Int when integral and inside int64 (as a Python int is), float otherwise, bool for booleans. */
export function scalarKindOf(value: number | boolean): ScalarKind {
  if (typeof value === 'boolean') return ScalarKind.Bool;
  return Number.isInteger(value) && value >= -TWO_63 && value < TWO_63 ? ScalarKind.Int : ScalarKind.Float;
}

// [lowest, max] of each dtype with a limited range; float64 and bool take every number.
const integerRange: Partial<Record<DType, readonly [number, number]>> = {
  uint8: [0, 255],
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [-TWO_63, TWO_63], // max exclusive: 2^63 - 1 is not a double
};
const floatMax: Partial<Record<DType, number>> = {
  float32: 3.4028234663852886e38,
  float16: 65504,
  bfloat16: 3.3895313892515355e38,
};

export function isIntegerDtype(dtype: DType): boolean {
  return integerRange[dtype] !== undefined;
}

export interface FitOptions {
  /** How PyTorch reads the value: as the Python scalar it stands for (default), or always as a float (F.pad's value). */
  as?: 'scalar' | 'float';
  /** float16/bfloat16 overflow: refused (default, as masked_fill and clamp) or rounded to ±inf (as torch.full). */
  reducedFloats?: 'refuse' | 'inf';
}

function fits(value: number, dtype: DType, options: FitOptions): boolean {
  const ints = integerRange[dtype];
  if (ints) {
    if (!Number.isFinite(value)) return false;
    const [lowest, max] = ints;
    const upperOk = dtype === 'int64' ? value < max : value <= max;
    // a Python int wraps into uint8 from -255 on, as two's complement (torch.full([1], -1, dtype=torch.uint8) is 255)
    const lowerOk = value >= lowest || (dtype === 'uint8' && options.as !== 'float' && scalarKindOf(value) === ScalarKind.Int && value >= -255);
    return upperOk && lowerOk;
  }
  const max = floatMax[dtype];
  if (max === undefined || !Number.isFinite(value)) return true; // float64, bool; inf and nan stay what they are
  if ((dtype === 'float16' || dtype === 'bfloat16') && options.reducedFloats === 'inf') return true;
  return Math.abs(value) <= max;
}

/**
 * `value` when the dtype holds it (PyTorch's rule: integer dtypes take finite values inside
 * their range, fractions truncated; float dtypes finite values up to their largest); else
 * INVALID_ARGUMENT naming the range.
 */
export function checkFits(name: string, value: number | boolean, dtype: DType, options: FitOptions = {}): number {
  if (typeof value === 'boolean') return Number(value);
  if (fits(value, dtype, options)) return value;
  const ints = integerRange[dtype];
  const range = ints
    ? dtype === 'int64' ? '[-2^63, 2^63 - 1]' : `[${ints[0]}, ${ints[1]}]`
    : `[-${floatMax[dtype]}, ${floatMax[dtype]}] or ±Infinity or NaN`;
  throw invalidParameter(name, `a ${ints ? 'finite ' : ''}number in ${dtype}'s range ${range}`, value);
}

/** A bigint as a Python int for an integer `dtype`: inside its range (uint8 wraps from -255 on). */
export function checkBigIntFits(name: string, value: bigint, dtype: DType): void {
  const ints = integerRange[dtype];
  if (!ints) return;
  const lowest = BigInt(ints[0]);
  const max = dtype === 'int64' ? 2n ** 63n - 1n : BigInt(ints[1]);
  const wraps = dtype === 'uint8' && value < 0n && value >= -255n;
  if ((value < lowest && !wraps) || value > max) {
    throw invalidParameter(name, `a bigint in ${dtype}'s range [${lowest}, ${max}]`, value);
  }
}

/** Whether a bigint fits int64 (a BigInt64Array wraps the others modulo 2^64). */
export const bigIntFitsInt64 = (value: bigint): boolean => value >= -(2n ** 63n) && value < 2n ** 63n;
