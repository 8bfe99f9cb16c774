// A tensor of a safetensors fixture (as a tools/reference script saved it), on a mesh.
import * as dt from '@dtorch/api';
import { readTensorBytes, type SafetensorsDtype, type SafetensorsHeader } from '@dtorch/external';

const dtypes: Record<SafetensorsDtype, dt.DType> = {
  F64: 'float64', F32: 'float32', F16: 'float16', BF16: 'bfloat16', I64: 'int64', I32: 'int32', I16: 'int16', I8: 'int8', U8: 'uint8', BOOL: 'bool',
  F8_E4M3: 'float8_e4m3fn', F8_E5M2: 'float8_e5m2',
};

/** Tensor `name` of the fixture file `header` describes; a name it lacks is an error naming it. */
export function fixtureTensor(header: SafetensorsHeader, name: string, options: { mesh?: dt.DeviceMesh; placements?: dt.Placement[] } = {}): dt.Tensor {
  const entry = header.tensors.get(name);
  if (!entry) throw new Error(`${header.path} has no fixture tensor ${name}`);
  return dt.fromBuffer(readTensorBytes(header, name), dtypes[entry.dtype], entry.shape, options);
}
