// Writing tensors to a safetensors file: each is read (gathered) and stored in its own dtype,
// bit for bit (bfloat16 and float16 come back from reads widened to float32, exactly, and are
// narrowed back here without rounding anything that was representable).
import * as dt from '@dtorch/api';
import { invalidParameter } from '@dtorch/common';
import { writeSafetensors, type TensorBytes } from '@dtorch/external';
import { toSafetensorsDtype } from './dtypes.js';

// float32 -> IEEE half, round to nearest even (exact for values that came from a half).
function toHalfBits(f: number, scratch: DataView): number {
  scratch.setFloat32(0, f, true);
  const x = scratch.getUint32(0, true);
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf, nan
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    if (e < -10) return sign; // underflow to zero
    mant |= 0x800000; // subnormal half
    const shift = 14 - e;
    const half = (mant >>> shift) + (((mant >>> (shift - 1)) & 1) && ((mant & ((1 << (shift - 1)) - 1)) || ((mant >>> shift) & 1)) ? 1 : 0);
    return sign | half;
  }
  const roundBit = (mant >>> 12) & 1;
  const sticky = mant & 0xfff;
  mant >>>= 13;
  if (roundBit && (sticky || (mant & 1))) {
    mant++;
    if (mant === 0x400) {
      mant = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | mant;
}

// float32 -> bfloat16: the top 16 bits, rounded to nearest even.
function toBfloat16Bits(f: number, scratch: DataView): number {
  scratch.setFloat32(0, f, true);
  const x = scratch.getUint32(0, true);
  if ((x & 0x7fffffff) > 0x7f800000) return (x >>> 16) | 0x40; // nan stays nan
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The raw little-endian bytes of `t` in its own dtype. */
export async function tensorBytes(t: dt.Tensor): Promise<TensorBytes> {
  const values = await t.data();
  const dtype = toSafetensorsDtype[t.dtype];
  let data: Uint8Array;
  if (t.dtype === 'float16' || t.dtype === 'bfloat16') {
    const narrow = t.dtype === 'float16' ? toHalfBits : toBfloat16Bits;
    const scratch = new DataView(new ArrayBuffer(4));
    const bits = Uint16Array.from(values as Float32Array, (v) => narrow(v, scratch));
    data = new Uint8Array(bits.buffer);
  } else {
    data = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  }
  return { dtype, shape: [...t.shape], data };
}

/**
 * Writes tensors to a safetensors file: `saveSafetensors(path, tensors, metadata?)`, the file's
 * path first, then the tensors by key (a Map or an object, e.g. a module's stateDict()), then
 * optional string metadata (the header's `__metadata__`). Each tensor is gathered and stored in
 * its own dtype, bit for bit; the tensors are not disposed. An existing file is replaced.
 */
export async function saveSafetensors(path: string, tensors: Map<string, dt.Tensor> | Record<string, dt.Tensor>, metadata?: Record<string, string>): Promise<void> {
  const entries = tensors instanceof Map ? [...tensors] : Object.entries(tensors);
  const out: Record<string, TensorBytes> = {};
  for (const [name, t] of entries) {
    if (!(t instanceof dt.Tensor)) throw invalidParameter(`saveSafetensors tensor "${name}"`, 'Tensor', t);
    out[name] = await tensorBytes(t);
  }
  writeSafetensors(path, out, metadata);
}
