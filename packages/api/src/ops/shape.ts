// Shape and view ops. The engine has a few primitives (reshape, permute, expand, cat, split,
// slice, index_select, repeat, pad, contiguous, clone, and joinShards / splitShards: cat and
// split piece by piece); the rest are written with them here, as PyTorch defines them.
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, checkNumber, describeValue, invalidParameter, isInteger } from '@dtorch/common';
import { checkTensor as checkInput, recordOp, recordOpOutputs } from '../record.js';
import { Replicate } from '../placement.js';
import { checkFits } from '../scalar.js';
import { atomic } from '../scope.js';
import { full } from './creation.js';
import { Tensor } from '../tensor.js';

const checkTensor = (fn: string, x: unknown): Tensor => checkInput(`${fn} input`, x);

function normDim(fn: string, dim: number, ndim: number): number {
  checkInteger(`${fn} dim`, dim);
  const bound = Math.max(ndim, 1);
  if (dim < -bound || dim >= bound) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${fn}: dim ${dim} is out of range for a ${ndim}-d tensor (expected a dim in [${-bound}, ${bound - 1}])`);
  }
  return dim < 0 ? dim + bound : dim;
}

function checkIntList(fn: string, what: string, values: unknown): number[] {
  if (!Array.isArray(values) || !values.every(isInteger)) throw invalidParameter(`${fn} ${what}`, 'array of integers', values);
  return values as number[];
}


/**
 * The same elements in `shape` (one dim may be -1).
 * @see {@link Tensor.reshape}
 */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  checkTensor('reshape', x);
  const s = checkIntList('reshape', 'shape', shape);
  return recordOp('reshape', [x], [s.length, ...s]);
}
/**
 * The same op as {@link reshape}, under torch.Tensor.view's name (any tensor can be viewed).
 * @see {@link Tensor.view}
 */
export const view = reshape;

/**
 * Merges dims `startDim`..`endDim` (default: all) into one, as torch.flatten; a 0-d tensor gives
 * shape [1].
 * @see {@link Tensor.flatten}
 */
export function flatten(x: Tensor, startDim = 0, endDim = -1): Tensor {
  checkTensor('flatten', x);
  if (x.ndim === 0) return reshape(x, [1]);
  const [s, e] = [normDim('flatten', startDim, x.ndim), normDim('flatten', endDim, x.ndim)];
  if (s > e) throw new DTorchError(ErrorCode.InvalidArgument, `flatten: startDim ${startDim} comes after endDim ${endDim}`);
  const merged = x.shape.slice(s, e + 1).reduce((a, b) => a * b, 1); // explicit: -1 is ambiguous for 0 elements
  return reshape(x, [...x.shape.slice(0, s), merged, ...x.shape.slice(e + 1)]);
}

/**
 * Splits dim `dim` into dims of `sizes` (their product its size; one may be -1), as torch.unflatten.
 * @see {@link Tensor.unflatten}
 */
export function unflatten(x: Tensor, dim: number, sizes: readonly number[]): Tensor {
  checkTensor('unflatten', x);
  const d = normDim('unflatten', dim, x.ndim);
  return reshape(x, [...x.shape.slice(0, d), ...checkIntList('unflatten', 'sizes', sizes), ...x.shape.slice(d + 1)]);
}

/**
 * Drops size-1 dims: all of them, or those listed.
 * @see {@link Tensor.squeeze}
 */
export function squeeze(x: Tensor, dim?: number | readonly number[]): Tensor {
  checkTensor('squeeze', x);
  if (dim !== undefined && typeof dim !== 'number' && !Array.isArray(dim)) throw invalidParameter('squeeze dim', 'integer or array of integers', dim);
  const dims = dim === undefined ? x.shape.map((_, d) => d) : (typeof dim === 'number' ? [dim] : dim).map((d) => normDim('squeeze', d, x.ndim));
  return reshape(x, x.shape.filter((s, d) => !(s === 1 && dims.includes(d))));
}

/**
 * Inserts a size-1 dim at `dim` (in [-ndim-1, ndim]), as torch.unsqueeze.
 * @see {@link Tensor.unsqueeze}
 */
export function unsqueeze(x: Tensor, dim: number): Tensor {
  checkTensor('unsqueeze', x);
  const d = normDim('unsqueeze', dim, x.ndim + 1);
  return reshape(x, [...x.shape.slice(0, d), 1, ...x.shape.slice(d)]);
}

/**
 * Reorders the dims: dim i of the result is dim `dims[i]` of `x`, as torch.permute; a sharded dim
 * stays sharded where it moves.
 * @see {@link Tensor.permute}
 */
export function permute(x: Tensor, dims: readonly number[]): Tensor {
  checkTensor('permute', x);
  const d = checkIntList('permute', 'dims', dims);
  return recordOp('permute', [x], [d.length, ...d]);
}

/**
 * Swaps dims `dim0` and `dim1`, as torch.transpose.
 * @see {@link Tensor.transpose}
 */
export function transpose(x: Tensor, dim0: number, dim1: number): Tensor {
  checkTensor('transpose', x);
  const [a, b] = [normDim('transpose', dim0, x.ndim), normDim('transpose', dim1, x.ndim)];
  const dims = x.shape.map((_, d) => (d === a ? b : d === b ? a : d));
  return permute(x, dims);
}

/**
 * A view with size-1 dims repeated to `shape` (-1 keeps a dim).
 * @see {@link Tensor.expand}
 */
export function expand(x: Tensor, shape: readonly number[]): Tensor {
  checkTensor('expand', x);
  const s = checkIntList('expand', 'shape', shape);
  return recordOp('expand', [x], [s.length, ...s]);
}

/**
 * The values in a row-major contiguous layout, as torch.Tensor.contiguous; always a new tensor.
 * @see {@link Tensor.contiguous}
 */
export function contiguous(x: Tensor): Tensor {
  return recordOp('contiguous', [checkTensor('contiguous', x)], []);
}

/**
 * A copy with its own memory, as torch.clone.
 * @see {@link Tensor.clone}
 */
export function clone(x: Tensor): Tensor {
  return recordOp('clone', [checkTensor('clone', x)], []);
}

function checkTensors(fn: string, tensors: unknown): Tensor[] {
  if (!Array.isArray(tensors) || tensors.length === 0 || !tensors.every((t) => t instanceof Tensor)) {
    throw invalidParameter(`${fn} tensors`, 'non-empty array of Tensors', tensors);
  }
  return tensors as Tensor[];
}

/**
 * Concatenates `tensors` (shapes equal but on `dim`) along existing dim `dim`, as torch.cat; shards
 * of other dims pass. One tensor gives a copy. {@link joinShards} joins along a sharded dim.
 */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  const ts = checkTensors('cat', tensors);
  checkInteger('cat dim', dim);
  if (ts.length === 1) {
    // one tensor is its own copy, once the call is one torch.cat accepts
    if (ts[0]!.ndim === 0) throw new DTorchError(ErrorCode.ShapeMismatch, 'cat: zero-dimensional tensor (input #0) cannot be concatenated; use stack');
    normDim('cat', dim, ts[0]!.ndim);
    return clone(ts[0]!);
  }
  return recordOp('cat', ts, [dim]);
}

/** Joins tensors of one shape along a new dim `dim`, as torch.stack. */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  const ts = checkTensors('stack', tensors);
  const d = normDim('stack', dim, ts[0]!.ndim + 1);
  return atomic(() => {
    const expanded = ts.map((t) => unsqueeze(t, d));
    const result = cat(expanded, d);
    for (const t of expanded) t.dispose();
    return result;
  });
}

/**
 * Pieces of `sizeOrSizes` along `dim` (the last may be shorter), as torch.split.
 * @see {@link Tensor.split}
 */
export function split(x: Tensor, sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
  checkTensor('split', x);
  const d = normDim('split', dim, x.ndim);
  const n = x.shape[d]!;
  let sizes: number[];
  if (typeof sizeOrSizes === 'number') {
    checkInteger('split size', sizeOrSizes, 1);
    sizes = [];
    for (let at = 0; at < n; at += sizeOrSizes) sizes.push(Math.min(sizeOrSizes, n - at));
    if (sizes.length === 0) sizes.push(0);
  } else {
    sizes = checkIntList('split', 'sizes', sizeOrSizes);
  }
  return recordOpOutputs('split', [x], [d, sizes.length, ...sizes]);
}

/**
 * `parts` joined along `dim` piece by piece, with no communication: each rank's piece of the
 * result is its pieces of the parts, cat in order. The parts must be placed alike. Where `dim`
 * is split into pieces (Shard(dim) on some mesh dims), the global order is therefore part 0's
 * piece 0, part 1's piece 0, ..., part 0's piece 1, ... (not torch.cat's: a permutation of it);
 * where it is whole, this is torch.cat. The result is Shard(dim) as the parts are, which needs
 * each rank's pieces to add up to the torch.chunk piece of the joined length on that rank
 * (SHAPE_MISMATCH otherwise): true when at most one part's length is not a multiple of the
 * pieces and its torch.chunk pieces are full but the last (333 text and 4,096 image tokens over
 * 2, 4 or 8 pieces; not 5 over 4). splitShards undoes it.
 */
export function joinShards(parts: readonly Tensor[], dim: number): Tensor {
  const ts = checkTensors('joinShards', parts);
  checkInteger('joinShards dim', dim);
  if (ts.length === 1) return cat(ts, dim);
  return recordOp('join_shards', ts, [dim]);
}

/**
 * The inverse of joinShards: `x` split along `dim` into parts of global lengths `sizes`, each
 * rank splitting its piece into its pieces of the parts (their torch.chunk sizes on that rank),
 * with no communication. Where `dim` is whole, this is split(x, sizes, dim).
 */
export function splitShards(x: Tensor, sizes: readonly number[], dim: number): Tensor[] {
  checkTensor('splitShards', x);
  const d = normDim('splitShards', dim, x.ndim);
  const s = checkIntList('splitShards', 'sizes', sizes);
  return recordOpOutputs('split_shards', [x], [d, s.length, ...s]);
}

/**
 * torch.chunk: pieces of ceil(size / chunks) along `dim`; there may be fewer than `chunks`.
 * @see {@link Tensor.chunk}
 */
export function chunk(x: Tensor, chunks: number, dim = 0): Tensor[] {
  checkTensor('chunk', x);
  checkInteger('chunk chunks', chunks, 1);
  const n = x.shape[normDim('chunk', dim, x.ndim)]!;
  return split(x, Math.max(1, Math.ceil(n / chunks)), dim);
}

/**
 * The slices along `dim`, each without that dim.
 * @see {@link Tensor.unbind}
 */
export function unbind(x: Tensor, dim = 0): Tensor[] {
  const d = normDim('unbind', dim, checkTensor('unbind', x).ndim);
  return atomic(() => {
    const pieces = split(x, 1, d);
    const result = pieces.map((p) => squeeze(p, d));
    for (const p of pieces) p.dispose();
    return result;
  });
}

// A slice bound or step: any integer, clamped into the exact integers (as Python clamps
// x[2**70:] to the end), so that what reaches native int64 is the bound meant.
function sliceInteger(name: string, value: unknown, min = -Infinity): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw invalidParameter(name, min === 1 ? 'positive integer' : 'integer', value);
  }
  return Math.min(Math.max(value, -Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
}

/** Elements start, start+step, ... before end along `dim` (Python slice semantics). */
export function sliceAlong(x: Tensor, dim: number, start = 0, end = Number.MAX_SAFE_INTEGER, step = 1): Tensor {
  checkTensor('slice', x);
  checkInteger('slice dim', dim);
  return recordOp('slice', [x], [dim, sliceInteger('slice start', start), sliceInteger('slice end', end), sliceInteger('slice step', step, 1)]);
}

/**
 * `length` elements from `start` along `dim`, as torch.narrow: a negative start counts from the
 * end; the range must lie inside the dim.
 * @see {@link Tensor.narrow}
 */
export function narrow(x: Tensor, dim: number, start: number, length: number): Tensor {
  checkTensor('narrow', x);
  if (x.ndim === 0) throw new DTorchError(ErrorCode.ShapeMismatch, 'narrow: a 0-d tensor has no dim to narrow');
  const d = normDim('narrow', dim, x.ndim);
  const size = x.shape[d]!;
  checkInteger('narrow start', start, -size, size);
  const from = start < 0 ? start + size : start;
  checkInteger('narrow length', length, 0, size - from);
  return sliceAlong(x, d, from, from + length, 1);
}

/**
 * The entries of `x` along `dim` at the positions in `index` (1-d int64 or int32, Replicate), as
 * torch.index_select; shards of other dims and partials pass.
 * @see {@link Tensor.indexSelect}
 */
export function indexSelect(x: Tensor, dim: number, index: Tensor): Tensor {
  checkTensor('indexSelect', x);
  checkTensor('indexSelect index', index);
  checkInteger('indexSelect dim', dim);
  return recordOp('index_select', [x, index], [dim]);
}

/**
 * Tiles the tensor `repeats[d]` times along each dim, as torch.Tensor.repeat.
 * @see {@link Tensor.repeat}
 */
export function repeat(x: Tensor, repeats: readonly number[]): Tensor {
  checkTensor('repeat', x);
  const r = checkIntList('repeat', 'repeats', repeats);
  return recordOp('repeat', [x], [r.length, ...r]);
}

/**
 * Repeats each element `repeats` times along `dim` (flattened when no dim), as
 * torch.repeat_interleave.
 * @see {@link Tensor.repeatInterleave}
 */
export function repeatInterleave(x: Tensor, repeats: number, dim?: number): Tensor {
  checkTensor('repeatInterleave', x);
  checkInteger('repeatInterleave repeats', repeats, 0);
  if (dim === undefined) {
    return atomic(() => {
      const flat = flatten(x);
      const result = repeatInterleave(flat, repeats, 0);
      flat.dispose();
      return result;
    });
  }
  const d = normDim('repeatInterleave', dim, x.ndim);
  if (!Number.isSafeInteger(x.shape[d]! * repeats)) {
    throw invalidParameter('repeatInterleave repeats', `integer whose product with dim ${d}'s size ${x.shape[d]} is below 2^53`, repeats);
  }
  return atomic(() => {
    const grown = unsqueeze(x, d + 1);
    const wide = expand(grown, [...x.shape.slice(0, d + 1), repeats, ...x.shape.slice(d + 1)]);
    const result = reshape(wide, [...x.shape.slice(0, d), x.shape[d]! * repeats, ...x.shape.slice(d + 1)]);
    dispose2(grown, wide);
    return result;
  });
}

function dispose2(...ts: Tensor[]): void {
  for (const t of ts) t.dispose();
}

/** Constant padding; `pad` lists (before, after) pairs from the last dim backwards, as F.pad. */
export function pad(x: Tensor, padding: readonly number[], options?: { mode?: 'constant'; value?: number }): Tensor {
  checkTensor('pad', x);
  const p = checkIntList('pad', 'padding', padding);
  const o = checkKnownOptions<{ mode: string; value: number }>('pad options', options, ['mode', 'value']);
  if ((o.mode ?? 'constant') !== 'constant') {
    throw new DTorchError(ErrorCode.InvalidArgument, `pad: mode ${describeValue(o.mode)} is not supported; use 'constant'`);
  }
  const value = o.value ?? 0;
  if (typeof value !== 'number') checkNumber('pad value', value);
  // F.pad reads the value as a float (so -1 does not wrap into uint8)
  return recordOp('pad', [x], [p.length, ...p, checkFits('pad value', value, x.dtype, { as: 'float' })]);
}

// ---- indexing --------------------------------------------------------------------------------

/** A range for Tensor.get: start (default 0), end (default the size), step (default 1). */
export class Slice {
  constructor(
    /** First index (default 0; negative counts from the end). */
    readonly start?: number,
    /** End index, exclusive (default the size; negative counts from the end). */
    readonly end?: number,
    /** Stride between indices, positive (default 1). */
    readonly step?: number,
  ) {
    Object.freeze(this);
  }
}
/**
 * A {@link Slice} for {@link get} and {@link set}, as Python's start:end:step: `x.get(dt.slice(1, null, 2))`
 * is x[1::2]. null or undefined leaves a bound at its default.
 */
export const slice = (start?: number | null, end?: number | null, step?: number | null): Slice =>
  new Slice(start ?? undefined, end ?? undefined, step ?? undefined);

/**
 * One index of {@link get} and {@link set}: an integer (drops its dim), a {@link Slice} (keeps it),
 * null (adds a size-1 dim), '...' (stands for the dims not indexed) or an integer tensor (selects
 * along its dim).
 */
export type Index = number | Slice | null | '...' | Tensor;

/**
 * x[...] as PyTorch indexes: integers drop their dim, slices keep it, null adds a size-1 dim,
 * '...' stands for the dims not indexed, an int tensor selects along its dim.
 * @see {@link Tensor.get}
 */
export function get(x: Tensor, ...indices: Index[]): Tensor {
  checkTensor('get', x);
  const consuming = indices.filter((i) => i !== null && i !== '...').length;
  const ellipses = indices.filter((i) => i === '...').length;
  if (ellipses > 1) throw new DTorchError(ErrorCode.InvalidArgument, "get: at most one '...' per index");
  if (consuming > x.ndim) {
    throw new DTorchError(ErrorCode.InvalidArgument, `get: ${consuming} indices for a ${x.ndim}-d tensor`);
  }
  const expandedIndices: Index[] = [];
  for (const i of indices) {
    if (i === '...') for (let k = 0; k < x.ndim - consuming; k++) expandedIndices.push(new Slice());
    else expandedIndices.push(i);
  }
  return atomic(() => {
    let current = x;
    const temporaries: Tensor[] = [];
    const step = (t: Tensor) => {
      if (current !== x) temporaries.push(current);
      current = t;
    };
    let dim = 0;
    for (const index of expandedIndices) {
      if (index === null) continue;
      if (typeof index === 'number') {
        checkInteger('get index', index);
        const size = current.shape[dim]!;
        const at = index < 0 ? index + size : index;
        if (at < 0 || at >= size) {
          throw new DTorchError(ErrorCode.InvalidArgument, `get: index ${index} is out of range for dim ${dim} of size ${size}`);
        }
        step(sliceAlong(current, dim, at, at + 1, 1));
      } else if (index instanceof Slice) {
        step(sliceAlong(current, dim, index.start ?? 0, index.end ?? Number.MAX_SAFE_INTEGER, index.step ?? 1));
      } else if (index instanceof Tensor) {
        step(indexSelect(current, dim, index));
      } else {
        throw invalidParameter('get index', "integer, dt.slice(), null, '...' or Tensor", index);
      }
      dim++;
    }
    // the result's shape: integer-indexed dims go, null adds a size-1 dim where it stands
    const shape: number[] = [];
    let cursor = 0;
    for (const index of expandedIndices) {
      if (index === null) shape.push(1);
      else if (typeof index === 'number') cursor++;
      else shape.push(current.shape[cursor++]!);
    }
    shape.push(...current.shape.slice(cursor));
    if (shape.join() !== current.shape.join()) step(reshape(current, shape));
    for (const t of temporaries) t.dispose();
    return current === x ? clone(x) : current;
  });
}

/**
 * x[...] = value, as PyTorch assigns: the indices are integers, dt.slice() ranges and '...', or
 * full ranges then one int64 index tensor; value (a tensor or a number) broadcasts to the indexed
 * region. Tensors are values in DTorch: `x` afterwards refers to the updated tensor (its old value
 * is released). A call that throws leaves `x` as it was; an index tensor is read here (its
 * values wait for it) so that an index out of range throws now instead of spoiling `x`.
 * @see {@link Tensor.set}
 */
export function set(x: Tensor, ...indicesAndValue: [...Index[], Tensor | number | boolean]): Tensor {
  checkTensor('set', x);
  if (indicesAndValue.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, 'set: give the indices, then the value');
  const value = indicesAndValue.at(-1) as Tensor | number | boolean;
  if (!(value instanceof Tensor)) checkSetValue(value);
  const indices = indicesAndValue.slice(0, -1) as Index[];
  if (indices.some((i) => i === null)) {
    throw new DTorchError(ErrorCode.InvalidArgument, "set: integers, dt.slice(), '...' and int64 index tensors index an assignment, not null");
  }
  if (indices.filter((i) => i === '...').length > 1) throw new DTorchError(ErrorCode.InvalidArgument, "set: at most one '...' per index");
  const tensorAt = indices.findIndex((i) => i instanceof Tensor);
  if (tensorAt >= 0) {
    if (indices.length !== tensorAt + 1 || indices.slice(0, tensorAt).some((i) => !(i instanceof Slice) || i.start !== undefined || i.end !== undefined || i.step !== undefined)) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'set: an index tensor must be the last index, after full dt.slice() ranges only');
    }
    if (tensorAt >= x.ndim) throw new DTorchError(ErrorCode.InvalidArgument, `set: an index tensor at dim ${tensorAt} of a ${x.ndim}-d tensor`);
    return setAlong(x, tensorAt, indices[tensorAt] as Tensor, value);
  }
  const consuming = indices.filter((i) => i !== '...').length;
  if (consuming > x.ndim) throw new DTorchError(ErrorCode.InvalidArgument, `set: ${consuming} indices for a ${x.ndim}-d tensor`);
  // one (start, end, step) per dim; integers keep a size-1 dim here and drop it for the value
  const ranges: [number, number, number][] = [];
  const dropped: boolean[] = [];
  for (const index of indices) {
    if (index === '...') {
      for (let k = 0; k < x.ndim - consuming; k++) {
        ranges.push([0, x.shape[ranges.length]!, 1]);
        dropped.push(false);
      }
      continue;
    }
    const size = x.shape[ranges.length]!;
    if (typeof index === 'number') {
      checkInteger('set index', index);
      const at = index < 0 ? index + size : index;
      if (at < 0 || at >= size) throw new DTorchError(ErrorCode.InvalidArgument, `set: index ${index} is out of range for dim ${ranges.length} of size ${size}`);
      ranges.push([at, at + 1, 1]);
      dropped.push(true);
    } else if (index instanceof Slice) {
      const step = sliceInteger('set slice step', index.step ?? 1, 1);
      const clampIndex = (i: number) => Math.min(Math.max(i < 0 ? i + size : i, 0), size);
      const start = clampIndex(sliceInteger('set slice start', index.start ?? 0));
      ranges.push([start, Math.max(start, clampIndex(sliceInteger('set slice end', index.end ?? size))), step]);
      dropped.push(false);
    } else {
      throw invalidParameter('set index', "integer, dt.slice() or '...'", index);
    }
  }
  while (ranges.length < x.ndim) {
    ranges.push([0, x.shape[ranges.length]!, 1]);
    dropped.push(false);
  }
  const region = ranges.map(([s, e, st]) => Math.ceil((e - s) / st));
  const result = atomic(() => {
    const temporaries: Tensor[] = [];
    const keep = (t: Tensor) => (temporaries.push(t), t);
    let src = value instanceof Tensor ? value : keep(scalarTensorLike(value, x));
    src = keep(expand(src, region.filter((_, d) => !dropped[d])));
    src = keep(reshape(src, region));
    // write the region in, innermost dim first: x[r0][r1]... = src
    const write = (t: Tensor, d: number, inner: Tensor): Tensor => {
      if (d === x.ndim) return inner;
      const [start, end, step] = ranges[d]!;
      const part = keep(sliceAlong(t, d, start, end, step));
      const updated = write(part, d + 1, inner);
      if (updated !== inner) keep(updated);
      return recordOp('slice_scatter', [t, updated], [d, start, end, step]);
    };
    let written = write(x, 0, src);
    // a 0-d x is the value itself: made x's dtype and placements here, as slice_scatter makes
    // them for any other x (and refused on another mesh, as slice_scatter refuses it)
    if (written === src) written = asWholeOf(x, src);
    for (const t of temporaries) if (t !== written && t !== value) t.dispose();
    return written;
  });
  x.adopt(result);
  return x;
}

// `value` (x's shape) as what x becomes when assigned it whole: x's dtype and placements, on x's mesh.
function asWholeOf(x: Tensor, value: Tensor): Tensor {
  if (!value.mesh.equals(x.mesh)) {
    throw new DTorchError(ErrorCode.MeshMismatch, `set: the value lives on ${value.mesh} but ${x.describe()} on ${x.mesh}; move it with redistribute(mesh, placements) first`);
  }
  const cast = value.dtype === x.dtype ? value : value.to(x.dtype);
  if (cast.placements.every((p, d) => p.equals(x.placements[d]!))) return cast;
  const placed = cast.redistribute(x.placements);
  if (cast !== value) cast.dispose();
  return placed;
}

// x[:, ..., index] = value along `dim` (index_copy), value broadcast to the indexed region.
function setAlong(x: Tensor, dim: number, index: Tensor, value: Tensor | number | boolean): Tensor {
  if (index.ndim !== 1 || index.dtype !== 'int64') {
    throw new DTorchError(ErrorCode.InvalidArgument, `set: an index tensor must be 1-d int64, got ${index.describe()}`);
  }
  // the one data-dependent check: index_copy fails in the kernel, after x took its result
  const size = x.shape[dim]!;
  const values = index.dataSync() as BigInt64Array;
  const bad = values.findIndex((v) => v < 0n || v >= BigInt(size));
  if (bad >= 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `set: index ${values[bad]} (at position ${bad} of the index tensor) is out of range for dim ${dim} of size ${size}`);
  }
  const region = x.shape.map((s, d) => (d === dim ? index.shape[0]! : s));
  const result = atomic(() => {
    const given = value instanceof Tensor ? value : scalarTensorLike(value, x);
    const src = expand(given, region);
    const copied = recordOp('index_copy', [x, index, src], [dim]);
    if (given !== value) given.dispose();
    src.dispose();
    return copied;
  });
  x.adopt(result);
  return x;
}

function checkSetValue(value: unknown): void {
  if (typeof value !== 'number' && typeof value !== 'boolean') throw invalidParameter('set value', 'Tensor, number or boolean', value);
}

function scalarTensorLike(value: number | boolean, like: Tensor): Tensor {
  checkSetValue(value);
  return full([], value, { dtype: like.dtype, mesh: like.mesh, placements: like.placements.map(() => Replicate()) });
}
