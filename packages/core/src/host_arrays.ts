import { DTorchError, ErrorCode } from '@dtorch/common';
// Host arrays of each dtype: what reads return and what tensor() accepts.
import type { HostArray } from './native_slice.js';

/** Every dtype the engine knows, by its PyTorch name (torch.float32 is 'float32'). */
export const dtypeNames = ['float32', 'float16', 'bfloat16', 'float64', 'int64', 'int32', 'int16', 'int8', 'uint8', 'bool', 'float8_e4m3fn', 'float8_e5m2'] as const;
/** A dtype name: one of {@link dtypeNames}, e.g. `'bfloat16'`. */
export type DTypeName = (typeof dtypeNames)[number];

/** The typed array a read of `dtype` returns (float16/bfloat16/float8 widen to float32, bool to uint8). */
export function hostArrayFor(dtype: DTypeName, buffer: ArrayBuffer): HostArray {
  switch (dtype) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
    case 'float8_e4m3fn':
    case 'float8_e5m2':
      return new Float32Array(buffer);
    case 'float64':
      return new Float64Array(buffer);
    case 'int64':
      return new BigInt64Array(buffer);
    case 'int32':
      return new Int32Array(buffer);
    case 'int16':
      return new Int16Array(buffer);
    case 'int8':
      return new Int8Array(buffer);
    case 'uint8':
    case 'bool':
      return new Uint8Array(buffer);
  }
}

/** The dtype whose elements a typed array holds; other typed arrays are refused. */
export function dtypeOfHostArray(data: ArrayBufferView): DTypeName {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof BigInt64Array) return 'int64';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Int16Array) return 'int16';
  if (data instanceof Int8Array) return 'int8';
  if (data instanceof Uint8Array) return 'uint8';
  throw new DTorchError(
    ErrorCode.InvalidArgument,
    `Expected Float32Array, Float64Array, BigInt64Array, Int32Array, Int16Array, Int8Array or Uint8Array but received ${data.constructor.name}; convert it first`,
  );
}
