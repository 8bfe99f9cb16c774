// DType names of the API and their checks.
import { DTorchError, ErrorCode, describeValue } from '@dtorch/common';
import { dtypeNames, type DTypeName } from '@dtorch/core';

/**
 * The name of an element type: 'float32' (the default of most creation functions), 'float16',
 * 'bfloat16', 'float64', 'int64', 'int32', 'int16', 'int8', 'uint8' or 'bool', as torch's dtypes; and the
 * 8-bit floats 'float8_e4m3fn' and 'float8_e5m2' (FP8 weights: they are stored, cast and multiplied
 * by the quantized linears, not computed with; a read widens them to float32).
 */
export type DType = DTypeName;
export { dtypeNames };

/** Returns `value` as a {@link DType} if it is one of {@link dtypeNames}; otherwise throws UNKNOWN_DTYPE naming `name` and the valid names. */
export function checkDtype(value: unknown, name = 'dtype'): DType {
  if (typeof value === 'string' && (dtypeNames as readonly string[]).includes(value)) return value as DType;
  throw new DTorchError(
    ErrorCode.UnknownDtype,
    `Expected one of ${dtypeNames.join(', ')} for ${name} but received ${describeValue(value)}`,
  );
}

/** Whether ops compute in `dtype`: float32, float16, bfloat16, float64 (not the 8-bit floats: see {@link isFloat8Dtype}). */
export function isFloatingDtype(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'float16' || dtype === 'bfloat16' || dtype === 'float64';
}

/** Whether `dtype` is an 8-bit float (float8_e4m3fn, float8_e5m2). */
export function isFloat8Dtype(dtype: DType): boolean {
  return dtype === 'float8_e4m3fn' || dtype === 'float8_e5m2';
}

/** The bytes one element of `dtype` takes, as torch's `element_size()`: 4 for float32, 2 for bfloat16, 1 for bool. */
export function bytesPerElement(dtype: DType): number {
  switch (dtype) {
    case 'float64':
    case 'int64':
      return 8;
    case 'float32':
    case 'int32':
      return 4;
    case 'float16':
    case 'bfloat16':
    case 'int16':
      return 2;
    default:
      return 1;
  }
}
