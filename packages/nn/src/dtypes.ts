// safetensors dtype names <-> DTorch dtypes (the same set: BF16/F16/F32/F64/I64/I32/I16/I8/U8/BOOL/F8_E4M3/F8_E5M2).
import type * as dt from '@dtorch/api';
import type { SafetensorsDtype } from '@dtorch/external';

/** The DTorch dtype of each safetensors dtype name. */
export const fromSafetensorsDtype: Record<SafetensorsDtype, dt.DType> = {
  F64: 'float64', F32: 'float32', F16: 'float16', BF16: 'bfloat16', I64: 'int64', I32: 'int32', I16: 'int16', I8: 'int8', U8: 'uint8', BOOL: 'bool', F8_E4M3: 'float8_e4m3fn', F8_E5M2: 'float8_e5m2',
};

/** The safetensors dtype name of each DTorch dtype. */
export const toSafetensorsDtype = Object.fromEntries(Object.entries(fromSafetensorsDtype).map(([k, v]) => [v, k])) as Record<dt.DType, SafetensorsDtype>;

export const isFloating = (dtype: dt.DType): boolean => dtype === 'float32' || dtype === 'float16' || dtype === 'bfloat16' || dtype === 'float64';
