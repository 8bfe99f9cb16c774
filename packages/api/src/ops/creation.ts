// Creation functions: tensors from JS data, from a shape and a value, ranges and random
// numbers, on any mesh (default: one CPU device) with one placement per mesh dim.
// Random numbers: every call gets a seed at record time (the given one, a dt.Generator's, or the
// next from manualSeed's sequence); each rank draws the full tensor from that seed on a CPU
// generator (after a Generator's earlier draws), so the same seed gives the same full tensor on
// one device and on any mesh.
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, checkNumber, checkShape, describeValue, invalidParameter } from '@dtorch/common';
import { dtypeOfHostArray, engine, type HostArray, type OpsWithAttrs } from '@dtorch/core';
import { DeviceMesh, defaultMesh } from '../device_mesh.js';
import { bytesPerElement, checkDtype, isFloatingDtype, type DType } from '../dtype.js';
import { ScalarKind, bigIntFitsInt64, checkBigIntFits, checkFits, isIntegerDtype, scalarKindOf } from '../scalar.js';
import { atomic } from '../scope.js';
import { Replicate, formatPlacements, normalizePlacements, type Placement } from '../placement.js';
import { checkTensor, output, writeCreationHeader, writeShape } from '../record.js';
import { Generator, type RandomDraw } from '../generator.js';
import { checkSeed, nextSeed } from '../random_seeds.js';
import type { NestedArray, Tensor } from '../tensor.js';

/** Where a creation function puts its tensor and of which dtype. */
export interface CreationOptions {
  /** Element type; the default depends on the function (float32 for most). */
  dtype?: DType;
  /** The mesh the tensor lies on; default {@link defaultMesh}, one CPU device. */
  mesh?: DeviceMesh;
  /** One per mesh dim; default Replicate on every dim. */
  placements?: readonly Placement[];
}

/** Options of the random creation functions: {@link CreationOptions} and a seed. */
export interface RandomOptions extends CreationOptions {
  /**
   * Seed of this call, an integer in [0, 2^48); default the next of {@link manualSeed}'s sequence.
   * The same seed gives the same full tensor on one device and on any mesh.
   */
  seed?: number;
  /**
   * Draw from this generator instead, continuing its stream as torch's `generator=` does: the
   * values equal torch's after the same earlier draws from torch.Generator().manual_seed(its seed).
   */
  generator?: Generator;
}

interface Resolved {
  mesh: DeviceMesh;
  placements: readonly Placement[];
  dtype: DType;
}

const CREATION_OPTIONS = ['dtype', 'mesh', 'placements'] as const;
const RANDOM_OPTIONS = [...CREATION_OPTIONS, 'seed', 'generator'] as const;
const TENSOR_OPTIONS = [...CREATION_OPTIONS, 'shape'] as const;

// The options object of a creation function: a plain object of known names.
function optionsOf<T extends object>(fn: string, options: unknown, known: readonly string[] = CREATION_OPTIONS): Partial<T> {
  return checkKnownOptions<T>(`${fn} options`, options, known);
}

// Mesh (default: one CPU device), placements (default: Replicate on every mesh dim; negative
// Shard dims count from the end of an `ndim`-d tensor) and dtype of a new tensor.
function resolve(options: CreationOptions | undefined, defaultDtype: DType, fn: string, ndim: number, known: readonly string[] = CREATION_OPTIONS): Resolved {
  options = optionsOf<CreationOptions>(fn, options, known);
  const mesh = options.mesh ?? defaultMesh();
  if (!(mesh instanceof DeviceMesh)) throw invalidParameter(`${fn} mesh`, 'DeviceMesh', mesh);
  const placements = normalizePlacements(options.placements ?? mesh.shape.map(() => Replicate()), mesh.ndim, ndim, fn);
  const dtype = options.dtype === undefined ? defaultDtype : checkDtype(options.dtype, `${fn} dtype`);
  return { mesh, placements, dtype };
}

function fromShape(op: OpsWithAttrs<readonly number[]>, fn: string, shape: readonly number[], r: Resolved, extra: readonly number[]): Tensor {
  const e = engine();
  let i = writeShape(writeCreationHeader(r.mesh, r.placements, r.dtype), shape);
  for (const v of extra) e.args[i++] = v;
  e.record(e.opCode(op), 0, i);
  return output(r.mesh);
}

/** A tensor of `value`; a value the dtype cannot hold is refused (as torch.full), float16/bfloat16 round to ±inf. */
export function full(shape: readonly number[], value: number | boolean, options?: CreationOptions): Tensor {
  if (typeof value !== 'number' && typeof value !== 'boolean') throw invalidParameter('full value', 'number or boolean', value);
  const defaultDtype: DType = typeof value === 'boolean' ? 'bool' : 'float32';
  const r = resolve(options, defaultDtype, 'full', checkShape('full shape', shape).length);
  return fromShape('full', 'full', shape, r, [checkFits('full value', value, r.dtype, { reducedFloats: 'inf' })]);
}

/** A tensor of zeros, float32 by default, as torch.zeros. */
export function zeros(shape: readonly number[], options?: CreationOptions): Tensor {
  return fromShape('full', 'zeros', shape, resolve(options, 'float32', 'zeros', checkShape('zeros shape', shape).length), [0]);
}

/** A tensor of ones, float32 by default, as torch.ones. */
export function ones(shape: readonly number[], options?: CreationOptions): Tensor {
  return fromShape('full', 'ones', shape, resolve(options, 'float32', 'ones', checkShape('ones shape', shape).length), [1]);
}

/** Uninitialised memory, as torch.empty. */
export function empty(shape: readonly number[], options?: CreationOptions): Tensor {
  return fromShape('empty', 'empty', shape, resolve(options, 'float32', 'empty', checkShape('empty shape', shape).length), []);
}

/**
 * arange(end) or arange(start, end, step?), the options last wherever the numbers end
 * (`arange(24, { mesh })`, as torch.arange(24, device=...)): int64 when every bound is an
 * integer (inside int64), else float32. An integer dtype takes integer bounds only.
 */
export function arange(end: number, options?: CreationOptions): Tensor;
export function arange(start: number, end: number, options?: CreationOptions): Tensor;
export function arange(start: number, end?: number, step?: number, options?: CreationOptions): Tensor;
export function arange(start: number, endOrOptions?: number | CreationOptions, stepOrOptions: number | CreationOptions = 1, options?: CreationOptions): Tensor {
  const isOptions = (v: unknown): v is CreationOptions => typeof v === 'object' && v !== null;
  let end: number | undefined;
  let step: number;
  if (isOptions(endOrOptions)) [end, step, options] = [undefined, 1, endOrOptions];
  else if (isOptions(stepOrOptions)) [end, step, options] = [endOrOptions, 1, stepOrOptions];
  else [end, step] = [endOrOptions, stepOrOptions];
  checkNumber('arange start', start);
  if (end === undefined) [start, end] = [0, start];
  checkNumber('arange end', end);
  checkNumber('arange step', step);
  if (![start, end, step].every(Number.isFinite)) throw invalidParameter('arange bounds', 'finite numbers', [start, end, step]);
  const integral = [start, end, step].every((v) => scalarKindOf(v) === ScalarKind.Int);
  const r = resolve(options, integral ? 'int64' : 'float32', 'arange', 1);
  if (r.dtype === 'bool') throw new DTorchError(ErrorCode.DtypeMismatch, 'arange: cannot make bool tensors; give a numeric dtype');
  if (isIntegerDtype(r.dtype) && !integral) {
    // PyTorch truncates each bound to int64 first, so fractional bounds count differently per dtype
    throw invalidParameter(`arange bounds (an ${r.dtype} arange)`, 'integers', [start, end, step]);
  }
  const e = engine();
  let i = writeCreationHeader(r.mesh, r.placements, r.dtype);
  e.args[i++] = start;
  e.args[i++] = end;
  e.args[i++] = step;
  e.record(e.opCode('arange'), 0, i);
  return output(r.mesh);
}

/** The n x m identity matrix (m defaults to n), float32 by default, as torch.eye. */
export function eye(n: number, m?: number | CreationOptions, options?: CreationOptions): Tensor {
  if (typeof m === 'object' && m !== null) [m, options] = [undefined, m];
  const cols = m ?? n;
  checkInteger('eye n', n, 0);
  checkInteger('eye m', cols, 0);
  const r = resolve(options, 'float32', 'eye', 2);
  return atomic(() => {
    const replicated = { mesh: r.mesh };
    const rows = arange(n, undefined, 1, replicated).reshape([n, 1]);
    const columns = arange(cols, undefined, 1, replicated).reshape([1, cols]);
    const diagonal = rows.eq(columns);
    const typed = r.dtype === 'bool' ? diagonal : diagonal.to(r.dtype);
    const placed = r.placements.every((p) => p.isReplicate()) ? typed : typed.redistribute(r.placements);
    for (const t of [rows, columns, diagonal, typed]) if (t !== placed) t.dispose();
    return placed;
  });
}

// ---- random -----------------------------------------------------------------------------

export { manualSeed } from '../random_seeds.js';

function random(op: 'rand' | 'randn', shape: readonly number[], options?: RandomOptions): Tensor {
  const r = resolve(options, 'float32', op, checkShape(`${op} shape`, shape).length, RANDOM_OPTIONS);
  if (!isFloatingDtype(r.dtype)) {
    throw new DTorchError(ErrorCode.DtypeMismatch, `${op}: random values need a floating dtype, got ${r.dtype}; use float32 (the default)`);
  }
  return drawn(options, { kind: op, dtype: r.dtype, shape }, (draws) => fromShape(op, op, shape, r, draws));
}

// The op's trailing attributes (the generator's earlier draws, their count, the seed) passed to
// `record`; the generator (if any) takes note of the draw once it is recorded.
function drawn(options: RandomOptions | undefined, draw: RandomDraw, record: (trailing: number[]) => Tensor): Tensor {
  const op = draw.kind;
  const { seed, generator } = options ?? {};
  if (generator !== undefined && !(generator instanceof Generator)) throw invalidParameter(`${op} generator`, 'a dt.Generator', generator);
  if (generator !== undefined && seed !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${op}: give seed or generator, not both`);
  if (seed !== undefined) checkSeed(`${op} seed`, seed);
  const earlier = generator?.earlierDraws() ?? [];
  const t = record([...earlier, earlier.length, generator?.initialSeed() ?? seed ?? nextSeed()]);
  generator?.noteDraw(draw);
  return t;
}

/** Uniform [0, 1). */
export function rand(shape: readonly number[], options?: RandomOptions): Tensor {
  return random('rand', shape, options);
}

/** Standard normal. */
export function randn(shape: readonly number[], options?: RandomOptions): Tensor {
  return random('randn', shape, options);
}

/** Integers uniform in [low, high), int64 by default, as torch.randint; the dtype must hold low and high - 1. */
export function randint(low: number, high: number, shape: readonly number[], options?: RandomOptions): Tensor {
  checkInteger('randint low', low);
  checkInteger('randint high', high, low + 1);
  const r = resolve(options, 'int64', 'randint', checkShape('randint shape', shape).length, RANDOM_OPTIONS);
  // as random_: no uint8 wrap for a negative low
  checkFits('randint low', low, r.dtype, { as: 'float' });
  checkFits('randint high - 1', high - 1, r.dtype, { as: 'float' });
  return drawn(options, { kind: 'randint', dtype: r.dtype, shape, low, high }, (draws) => fromShape('randint', 'randint', shape, r, [low, high, ...draws]));
}

// ---- from data --------------------------------------------------------------------------

/** Options of {@link tensor}: {@link CreationOptions} and a shape for flat data. */
export interface TensorOptions extends CreationOptions {
  /** Shape for flat data (a typed array or a flat list); inferred from nesting otherwise. */
  shape?: readonly number[];
}

type Leaf = number | boolean | bigint;

function inferShape(data: NestedArray): number[] {
  const shape: number[] = [];
  let level: NestedArray = data;
  while (Array.isArray(level)) {
    shape.push(level.length);
    if (level.length === 0) break;
    level = level[0]!;
  }
  return shape;
}

function flattenInto(data: NestedArray, shape: readonly number[], dim: number, path: string, out: Leaf[]): void {
  if (dim === shape.length) {
    if (Array.isArray(data)) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `tensor: ragged data: ${path} is an array where a value was expected`);
    }
    if (typeof data !== 'number' && typeof data !== 'boolean' && typeof data !== 'bigint') {
      throw invalidParameter(`tensor data ${path}`, 'number, boolean or bigint', data);
    }
    out.push(data);
    return;
  }
  if (!Array.isArray(data) || data.length !== shape[dim]) {
    const got = Array.isArray(data) ? `${data.length} entries` : describeValue(data);
    throw new DTorchError(ErrorCode.ShapeMismatch, `tensor: ragged data: ${path} has ${got} but ${shape[dim]} were expected (its siblings' length)`);
  }
  data.forEach((d, i) => flattenInto(d, shape, dim + 1, `${path}[${i}]`, out));
}

function leafKind(leaves: Leaf[]): 'number' | 'boolean' | 'bigint' {
  const kinds = new Set(leaves.map((v) => typeof v));
  if (kinds.size > 1) {
    throw new DTorchError(ErrorCode.InvalidArgument, `tensor: data mixes ${[...kinds].join(' and ')} values; use one kind`);
  }
  return (kinds.values().next().value ?? 'number') as 'number' | 'boolean' | 'bigint';
}

// The leaves as a host array for `dtype`, each checked as torch.tensor checks a Python scalar:
// an integer dtype refuses values outside its range (a BigInt64Array would wrap them modulo 2^64,
// a float-to-int cast make them undefined); a float dtype takes any (bigints past int64 too).
function hostArrayOf(leaves: Leaf[], kind: 'number' | 'boolean' | 'bigint', dtype: DType): { host: HostArray; source: DType } {
  if (kind === 'boolean') return { host: Uint8Array.from(leaves as boolean[], (b) => (b ? 1 : 0)), source: 'uint8' };
  if (kind === 'bigint') {
    const values = leaves as bigint[];
    if (isIntegerDtype(dtype)) values.forEach((v, i) => checkBigIntFits(`tensor data [${i}]`, v, dtype));
    else if (!values.every(bigIntFitsInt64)) return { host: Float64Array.from(values, Number), source: 'float64' };
    return { host: BigInt64Array.from(values), source: 'int64' };
  }
  const values = leaves as number[];
  if (isIntegerDtype(dtype)) values.forEach((v, i) => checkFits(`tensor data [${i}]`, v, dtype));
  return { host: Float64Array.from(values), source: 'float64' };
}

const naturalDtype = { number: 'float32', boolean: 'bool', bigint: 'int64' } as const;

// Typed arrays convert as a tensor's to(dtype) does (ints wrap, as torch.tensor(numpy array)),
// except that a float that no integer dtype holds (NaN, ±Infinity, out of range) is refused:
// that cast has no defined result.
function checkHostConversion(host: HostArray, source: DType, dtype: DType): void {
  if (!isFloatingDtype(source) || !isIntegerDtype(dtype)) return;
  for (let i = 0; i < host.length; i++) checkFits(`tensor data [${i}]`, host[i] as number, dtype, { as: 'float' });
}

const isHostArray = (v: unknown): v is HostArray => ArrayBuffer.isView(v) && !(v instanceof DataView);

/**
 * A tensor from JS data: a number, boolean or bigint, nested arrays of them, or a typed array.
 * Default dtype: float32 for numbers (JS has no int literals), bool for booleans, int64 for
 * bigints, and the typed array's own dtype.
 */
export function tensor(data: NestedArray | HostArray, options?: TensorOptions): Tensor {
  const o = optionsOf<TensorOptions>('tensor', options, TENSOR_OPTIONS);
  let host: HostArray;
  let source: DType;
  let r: Resolved;
  let shape: readonly number[];
  if (isHostArray(data)) {
    host = data;
    source = dtypeOfHostArray(data);
    shape = o.shape ? checkShape('tensor shape', o.shape) : [data.length];
    r = resolve(o, source, 'tensor', shape.length, TENSOR_OPTIONS);
    checkHostConversion(host, source, r.dtype);
  } else {
    const nestedShape = inferShape(data);
    const leaves: Leaf[] = [];
    flattenInto(data, nestedShape, 0, 'data', leaves);
    shape = o.shape ? checkShape('tensor shape', o.shape) : nestedShape;
    const kind = leafKind(leaves);
    r = resolve(o, naturalDtype[kind], 'tensor', shape.length, TENSOR_OPTIONS);
    ({ host, source } = hostArrayOf(leaves, kind, r.dtype));
  }
  const numel = shape.reduce((a, b) => a * b, 1);
  if (numel !== host.length) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `tensor: data has ${host.length} elements but shape [${shape.join(', ')}] needs ${numel}`);
  }
  const e = engine();
  const n = writeShape(writeCreationHeader(r.mesh, r.placements, r.dtype), shape);
  e.recordData(e.opCode('from_data'), n, host, source);
  return output(r.mesh);
}

/**
 * A tensor from raw little-endian bytes of `dtype` (e.g. read from a safetensors file; bfloat16
 * and float16 as their 16-bit patterns), copied now.
 */
export function fromBuffer(bytes: Uint8Array, dtype: DType, shape: readonly number[], options?: Omit<CreationOptions, 'dtype'>): Tensor {
  if (!(bytes instanceof Uint8Array)) throw invalidParameter('fromBuffer bytes', 'Uint8Array', bytes);
  checkDtype(dtype, 'fromBuffer dtype');
  checkShape('fromBuffer shape', shape);
  // the bytes are of `dtype`: the options give only where the tensor lies
  const r = resolve({ ...optionsOf<CreationOptions>('fromBuffer', options, ['mesh', 'placements']), dtype }, dtype, 'fromBuffer', shape.length);
  const e = engine();
  const n = writeShape(writeCreationHeader(r.mesh, r.placements, r.dtype), shape);
  e.recordData(e.opCode('from_data'), n, bytes, dtype);
  return output(r.mesh);
}

/** Options of {@link fromLocalBuffers}: the mesh and placements of the pieces, and the result's dtype. */
export interface LocalBuffersOptions extends CreationOptions {
  /** Dtype of the result; the pieces (of the source dtype) are converted on the way. Default: the source dtype. */
  dtype?: DType;
}

/**
 * A distributed tensor from each rank's own piece, as DTensor.from_local: `pieces[rank]` holds
 * raw little-endian bytes of `sourceDtype` for that rank's piece of the `globalShape` tensor
 * under `placements` (torch.chunk sizes, see localShape). No rank sees the full tensor, so a
 * loader reads only each rank's bytes. Ranks may share one buffer (the same Uint8Array object,
 * e.g. a Replicate group); it is copied once. Under Partial each piece is taken as that rank's
 * partial value.
 */
export function fromLocalBuffers(
  pieces: readonly Uint8Array[],
  sourceDtype: DType,
  globalShape: readonly number[],
  options?: LocalBuffersOptions,
): Tensor {
  checkDtype(sourceDtype, 'fromLocalBuffers sourceDtype');
  checkShape('fromLocalBuffers globalShape', globalShape);
  const r = resolve(options, sourceDtype, 'fromLocalBuffers', globalShape.length);
  if (!Array.isArray(pieces) || pieces.length !== r.mesh.size) {
    throw invalidParameter('fromLocalBuffers pieces', `array of ${r.mesh.size} Uint8Array (one per rank of ${r.mesh})`, pieces);
  }
  const size = bytesPerElement(sourceDtype);
  const distinct = new Map<Uint8Array, number>(); // buffer -> element offset in the host data
  const offsets: number[] = [];
  let elements = 0;
  pieces.forEach((piece, rank) => {
    if (!(piece instanceof Uint8Array)) throw invalidParameter(`fromLocalBuffers pieces[${rank}]`, 'Uint8Array', piece);
    const local = localPieceOf(globalShape, r.placements, r.mesh, rank).shape;
    const expected = local.reduce((a, b) => a * b, 1) * size;
    if (piece.byteLength !== expected) {
      throw new DTorchError(
        ErrorCode.ShapeMismatch,
        `fromLocalBuffers: rank ${rank}'s piece has ${piece.byteLength} bytes but its local shape [${local.join(', ')}] of ${sourceDtype} needs ${expected} (global shape [${globalShape.join(', ')}], placements ${formatPlacements(r.placements)})`,
      );
    }
    let offset = distinct.get(piece);
    if (offset === undefined) {
      distinct.set(piece, (offset = elements));
      elements += piece.byteLength / size;
    }
    offsets.push(offset);
  });
  // one distinct piece (one device, or all ranks alike) goes as it is: the engine copies it at
  // record time anyway, so joining the pieces first would be a second pass over every byte
  const host = distinct.size === 1 ? pieces[0]! : new Uint8Array(elements * size);
  if (host !== pieces[0]) for (const [piece, offset] of distinct) host.set(piece, offset * size);
  const e = engine();
  let i = writeShape(writeShape(writeCreationHeader(r.mesh, r.placements, r.dtype), [elements]), globalShape);
  e.reserveArgs(i + offsets.length); // one offset per rank
  for (const offset of offsets) e.args[i++] = offset;
  e.recordData(e.opCode('from_local_data'), i, host, sourceDtype);
  return output(r.mesh);
}

/** One rank's piece of a distributed tensor, as {@link localPieceOf} computes it. */
export interface LocalPiece {
  /** Shape of the piece: torch.chunk sizes along sharded dims (some may be 0). */
  shape: number[];
  /** Where the piece starts in the full tensor, per dim. */
  offset: number[];
}

/**
 * Rank `rank`'s piece of a `shape` tensor under `placements` (normalised, one per mesh dim),
 * without a tensor: torch.chunk sizes, mesh dims applied in order (as the engine's layout).
 */
export function localPieceOf(shape: readonly number[], placements: readonly Placement[], mesh: DeviceMesh, rank: number): LocalPiece {
  const local = [...shape];
  const offset = shape.map(() => 0);
  const coords = mesh.coordinates(rank);
  placements.forEach((p, d) => {
    if (!p.isShard()) return;
    const size = local[p.dim]!;
    const each = Math.ceil(size / mesh.shape[d]!);
    offset[p.dim] = offset[p.dim]! + Math.min(size, each * coords[d]!);
    local[p.dim] = Math.min(Math.max(size - each * coords[d]!, 0), each);
  });
  return { shape: local, offset };
}

// ---- *Like --------------------------------------------------------------------------------

function likeOptions(fn: string, t: Tensor, options: unknown, known: readonly string[] = CREATION_OPTIONS): CreationOptions {
  const like = checkTensor(`${fn} input`, t);
  return { dtype: like.dtype, mesh: like.mesh, placements: like.placements, ...optionsOf<RandomOptions>(fn, options, known) };
}
// the options first: they check that t is a Tensor before its shape is read
/** Zeros of `t`'s shape, dtype, mesh and placements (each overridable in `options`), as torch.zeros_like. */
export const zerosLike = (t: Tensor, options?: CreationOptions): Tensor => {
  const like = likeOptions('zerosLike', t, options);
  return zeros(t.shape, like);
};
/** Ones of `t`'s shape, dtype, mesh and placements (each overridable in `options`), as torch.ones_like. */
export const onesLike = (t: Tensor, options?: CreationOptions): Tensor => {
  const like = likeOptions('onesLike', t, options);
  return ones(t.shape, like);
};
/** `value` in `t`'s shape, dtype, mesh and placements (each overridable in `options`), as torch.full_like. */
export const fullLike = (t: Tensor, value: number | boolean, options?: CreationOptions): Tensor => {
  const like = likeOptions('fullLike', t, options);
  return full(t.shape, value, like);
};
/** Standard normal values in `t`'s shape, dtype, mesh and placements (each overridable in `options`, with a seed), as torch.randn_like. */
export const randnLike = (t: Tensor, options?: RandomOptions): Tensor => {
  const like = likeOptions('randnLike', t, options, RANDOM_OPTIONS);
  return randn(t.shape, like);
};
