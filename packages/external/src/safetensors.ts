// The safetensors format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) byte range in the data that follows, an optional
// "__metadata__" map of strings. A strict reader (every range inside the file, no overlaps,
// sizes that match the shapes, a capped header) with positioned reads, so that a caller can read
// just the bytes it needs; and a writer.
import { closeSync, openSync, readSync, fstatSync, writeFileSync } from 'node:fs';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** Bytes per element of each dtype a safetensors header may name, by its name in the format. */
export const safetensorsDtypes = {
  /** float64 (torch.float64). */
  F64: 8,
  /** float32 (torch.float32). */
  F32: 4,
  /** IEEE half precision (torch.float16). */
  F16: 2,
  /** bfloat16 (torch.bfloat16): float32's exponent range with 8 bits of mantissa. */
  BF16: 2,
  /** int64 (torch.int64). */
  I64: 8,
  /** int32 (torch.int32). */
  I32: 4,
  /** int16 (torch.int16). */
  I16: 2,
  /** int8 (torch.int8). */
  I8: 1,
  /** uint8 (torch.uint8). */
  U8: 1,
  /** bool, one byte per element, 0 or 1 (torch.bool). */
  BOOL: 1,
  /** 8-bit float, 4 exponent and 3 mantissa bits, no infinities, ±448 (torch.float8_e4m3fn): FP8 checkpoints' weights. */
  F8_E4M3: 1,
  /** 8-bit float, 5 exponent and 2 mantissa bits, ±57344 (torch.float8_e5m2). */
  F8_E5M2: 1,
} as const;
/** A dtype name of the safetensors format: one of {@link safetensorsDtypes}' keys, e.g. `'BF16'`. */
export type SafetensorsDtype = keyof typeof safetensorsDtypes;

/** One tensor of a safetensors header: where its bytes lie and how to read them. */
export interface TensorEntry {
  /** The tensor's name in the file, e.g. `"model.layers.0.self_attn.q_proj.weight"`. */
  name: string;
  /** Its element type, as the header names it. */
  dtype: SafetensorsDtype;
  /** Its size per dim, row-major; `[]` for a scalar. */
  shape: number[];
  /** Byte range in the file (absolute offsets). */
  begin: number;
  /** One past the last byte of its data in the file (absolute offset). */
  end: number;
}

/** The checked header of one safetensors file. */
export interface SafetensorsHeader {
  /** The file it was read from, used by later reads and in error messages. */
  path: string;
  /** Every tensor of the file, by name, in header order. */
  tensors: Map<string, TensorEntry>;
  /** The header's `__metadata__` strings (e.g. `format: "pt"`); empty when it has none. */
  metadata: Record<string, string>;
}

/** Largest header accepted (the format's reference implementation uses 100 MB). */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;

function bad(path: string, reason: string): DTorchError {
  return new DTorchError(ErrorCode.BadFile, `${path}: not a valid safetensors file: ${reason}`);
}

/** Reads exactly `length` bytes at `position`; a short file is BAD_FILE naming `path`. */
export function readExactly(fd: number, length: number, position: number, path: string): Buffer {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buffer, done, length - done, position + done);
    if (n === 0) throw bad(path, `the file ends at byte ${position + done}, ${length - done} bytes early`);
    done += n;
  }
  return buffer;
}

/** Reads and checks the header of `path`; tensor data is not read. */
export function readSafetensorsHeader(path: string): SafetensorsHeader {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw new DTorchError(ErrorCode.BadFile, `${path}: cannot open: ${(err as Error).message}`);
  }
  try {
    return parseSafetensorsHeader(path, fstatSync(fd).size, (length, position) => readExactly(fd, length, position, path));
  } finally {
    closeSync(fd);
  }
}

/**
 * Checks the header of a safetensors file of `fileSize` bytes, reading through `readAt`
 * (positioned reads of exactly `length` bytes). Every way a header can be wrong gives a
 * BAD_FILE DTorchError naming `path` and the reason.
 */
export function parseSafetensorsHeader(path: string, fileSize: number, readAt: (length: number, position: number) => Uint8Array): SafetensorsHeader {
  if (fileSize < 8) throw bad(path, `the file has ${fileSize} bytes, fewer than the 8-byte header length`);
  const prefix = readAt(8, 0);
  const headerLength = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (headerLength > BigInt(MAX_HEADER_BYTES)) throw bad(path, `the header claims ${headerLength} bytes, more than the ${MAX_HEADER_BYTES} allowed`);
  const n = Number(headerLength);
  if (8 + n > fileSize) throw bad(path, `the header claims ${n} bytes but the file has ${fileSize - 8} after the length`);
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(readAt(n, 8)).toString('utf8'));
  } catch (err) {
    throw bad(path, `the header is not JSON (${(err as Error).message})`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw bad(path, 'the header is not a JSON object');
  const dataStart = 8 + n;
  const tensors = new Map<string, TensorEntry>();
  let metadata: Record<string, string> = {};
  for (const [name, raw] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || !Object.values(raw).every((v) => typeof v === 'string')) {
        throw bad(path, '__metadata__ must map strings to strings');
      }
      metadata = raw as Record<string, string>;
      continue;
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw bad(path, `tensor "${name}" is ${JSON.stringify(raw)}; expected {dtype, shape, data_offsets}`);
    }
    const e = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e.dtype !== 'string' || !Object.hasOwn(safetensorsDtypes, e.dtype)) {
      throw bad(path, `tensor "${name}" has dtype ${JSON.stringify(e.dtype)}; known: ${Object.keys(safetensorsDtypes).join(', ')}`);
    }
    if (!Array.isArray(e.shape) || !e.shape.every((s) => Number.isSafeInteger(s) && s >= 0)) {
      throw bad(path, `tensor "${name}" has shape ${JSON.stringify(e.shape)}; expected non-negative integers`);
    }
    const offsets = e.data_offsets;
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1]) {
      throw bad(path, `tensor "${name}" has data_offsets ${JSON.stringify(offsets)}; expected [begin, end] with begin <= end`);
    }
    const dtype = e.dtype as SafetensorsDtype;
    const expected = (e.shape as number[]).reduce((a, b) => a * b, 1) * safetensorsDtypes[dtype];
    if (offsets[1] - offsets[0] !== expected) {
      throw bad(path, `tensor "${name}" (${dtype} [${e.shape}]) needs ${expected} bytes but its range holds ${offsets[1] - offsets[0]}`);
    }
    const [begin, end] = [dataStart + offsets[0], dataStart + offsets[1]];
    if (end > fileSize) throw bad(path, `tensor "${name}" ends at byte ${end}, past the end of the file (${fileSize})`);
    tensors.set(name, { name, dtype, shape: e.shape as number[], begin, end });
  }
  const ranges = [...tensors.values()].filter((t) => t.end > t.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++) {
    if (ranges[i]!.begin < ranges[i - 1]!.end) throw bad(path, `tensors "${ranges[i - 1]!.name}" and "${ranges[i]!.name}" overlap`);
  }
  return { path, tensors, metadata };
}

/** Reads bytes [begin, end) of an entry, or a sub-range of them (positioned read). */
export function readTensorBytes(header: SafetensorsHeader, name: string, from = 0, length?: number): Uint8Array {
  const entry = header.tensors.get(name);
  if (!entry) throw new DTorchError(ErrorCode.BadFile, `${header.path}: has no tensor "${name}"`);
  const size = entry.end - entry.begin;
  const n = length ?? size - from;
  if (from < 0 || n < 0 || from + n > size) {
    throw new DTorchError(ErrorCode.InvalidArgument, `bytes [${from}, ${from + n}) are outside tensor "${name}" (${size} bytes)`);
  }
  const fd = openSync(header.path, 'r');
  try {
    return new Uint8Array(readExactly(fd, n, entry.begin + from, header.path));
  } finally {
    closeSync(fd);
  }
}

/** A tensor to write with {@link writeSafetensors}. */
export interface TensorBytes {
  /** The element type of `data`. */
  dtype: SafetensorsDtype;
  /** Size per dim; the product times the dtype's size must be `data`'s length. */
  shape: readonly number[];
  /** The elements, row-major, little-endian. */
  data: Uint8Array;
}

/** Writes tensors (raw little-endian bytes per entry) and string metadata to `path`. */
export function writeSafetensors(path: string, tensors: Record<string, TensorBytes>, metadata?: Record<string, string>): void {
  const header: Record<string, unknown> = {};
  if (metadata) header['__metadata__'] = metadata;
  let offset = 0;
  const parts: Uint8Array[] = [];
  for (const [name, t] of Object.entries(tensors)) {
    if (!(t.dtype in safetensorsDtypes)) throw new DTorchError(ErrorCode.InvalidArgument, `tensor "${name}": unknown safetensors dtype ${t.dtype}`);
    const expected = t.shape.reduce((a, b) => a * b, 1) * safetensorsDtypes[t.dtype];
    if (t.data.byteLength !== expected) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `tensor "${name}": ${t.data.byteLength} bytes for ${t.dtype} [${t.shape}] which needs ${expected}`);
    }
    header[name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + expected] };
    parts.push(t.data);
    offset += expected;
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8');
  const padding = (8 - (json.length % 8)) % 8; // keep the data 8-byte aligned, as the reference writer does
  json = Buffer.concat([json, Buffer.alloc(padding, 0x20)]);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([length, json, ...parts]));
}
