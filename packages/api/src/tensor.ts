// Tensor: the client-side symbol of a distributed tensor. It holds metadata (shape, dtype,
// mesh, one placement per mesh dim) and an engine id, never data; values are read with
// data()/array()/item() (async) or dataSync(). Methods delegate to the op functions.
import { constants as bufferConstants } from 'node:buffer';
import { DTorchError, ErrorCode, formatShape } from '@dtorch/common';
import { engine, type HostArray } from '@dtorch/core';
import type { DeviceMesh } from './device_mesh.js';
import { bytesPerElement, type DType } from './dtype.js';
import { formatPlacements, type Placement } from './placement.js';
import { setTensorCheck, trackTensor } from './scope.js';
import * as cast from './ops/cast.js';
import * as elementwise from './ops/elementwise.js';
import * as linalg from './ops/matmul.js';
import * as reduction from './ops/reduction.js';
import * as movement from './ops/redistribute.js';
import * as shapes from './ops/shape.js';

// Safety net: a tensor the program dropped without dispose() is released when collected.
// No unregister token (they cost a hash table entry per tensor): a tensor disposed earlier is
// released again when collected, which the engine ignores (ids are never reused).
const collected = new FinalizationRegistry<number>((id) => engine().release(id));

// The largest ArrayBuffer this Node makes (buffer.constants.MAX_LENGTH).
const MAX_HOST_BYTES = bufferConstants.MAX_LENGTH;

/**
 * A JS scalar operand: a number (an int when integral inside int64, else a float, as Python
 * scalars are typed) or a boolean.
 */
export type Scalar = number | boolean;
/**
 * Nested JS arrays of numbers, booleans or bigints, one level per dim: the data of {@link tensor}
 * and the result of {@link Tensor.array}.
 */
export type NestedArray = number | boolean | bigint | NestedArray[];

/**
 * A distributed tensor, as PyTorch's DTensor: a logical tensor of `shape` and `dtype` laid out
 * over `mesh` by one {@link Placement} per mesh dim. The object holds metadata and an engine id,
 * never data: ops are recorded and run on the devices' worker threads, and values are read with
 * {@link Tensor.data | data()}, {@link Tensor.array | array()} and {@link Tensor.item | item()}
 * (or their blocking forms, such as dataSync()). Made by creation functions and ops; freed by
 * `dispose()`, {@link tidy} or `using`.
 */
export class Tensor {
  #id: number;
  #disposed = false;
  // eslint-disable-next-line no-unused-private-class-members -- written only: it keeps the adopted tensor alive (see adopt())
  #adoptedFrom: Tensor | undefined;
  /** Set by keep(): no tidy() frees this tensor. */
  kept = false;
  /** Size of each dim of the full (logical) tensor, not of a device's piece (see {@link Tensor.localShape}). */
  readonly shape: readonly number[];
  /** Element type. */
  readonly dtype: DType;
  /** The devices the tensor lies on. */
  readonly mesh: DeviceMesh;
  /** How the tensor lies along each mesh dim: one {@link Placement} per mesh dim. */
  readonly placements: readonly Placement[];

  /** @internal Tensors are made by ops and creation functions, not by users. */
  constructor(id: number, shape: readonly number[], dtype: DType, mesh: DeviceMesh, placements: readonly Placement[]) {
    this.#id = id;
    this.shape = shape;
    this.dtype = dtype;
    this.mesh = mesh;
    this.placements = placements;
    collected.register(this, id);
    trackTensor(this);
  }

  /** Engine id; throws TENSOR_DISPOSED once the tensor is disposed. */
  get id(): number {
    if (this.#disposed) {
      throw new DTorchError(
        ErrorCode.Disposed,
        `${this.describe()} was disposed and cannot be used; keep() it or return it from tidy() to use it later`,
      );
    }
    return this.#id;
  }

  /** Whether dispose() (or a tidy() around it) has freed this tensor; a disposed tensor cannot be used. */
  get isDisposed(): boolean {
    return this.#disposed;
  }

  /** Number of dims (0 for a scalar tensor). */
  get ndim(): number {
    return this.shape.length;
  }

  /** Number of elements of the full tensor (the product of `shape`). */
  get numel(): number {
    let n = 1;
    for (const s of this.shape) n *= s;
    return n;
  }

  /** Bytes of the full (logical) tensor. */
  get nbytes(): number {
    return this.numel * bytesPerElement(this.dtype);
  }

  /**
   * @internal Takes over `other`'s value (its id, same shape and dtype): how an assignment
   * such as set() updates this tensor. Releases the old value; `other` becomes disposed.
   */
  adopt(other: Tensor): void {
    if (other.shape.join() !== this.shape.join() || other.dtype !== this.dtype || other.mesh !== this.mesh) {
      throw new DTorchError(ErrorCode.Internal, `cannot adopt ${other} into ${this}`);
    }
    const old = this.id;
    this.#id = other.id;
    (this as { placements: readonly Placement[] }).placements = other.placements;
    other.#disposed = true;
    // `other` is registered to release this id when it is collected: it must live as long as this
    this.#adoptedFrom = other;
    engine().release(old);
  }

  /** Frees the tensor's memory on every device now; later uses throw TENSOR_DISPOSED. Disposing twice does nothing. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    engine().release(this.#id);
  }

  /** Disposes the tensor at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  // ---- reads -------------------------------------------------------------------------------

  /** The full tensor, row-major (float16/bfloat16 as Float32Array, int64 as BigInt64Array, bool as Uint8Array). */
  data(): Promise<HostArray> {
    return engine().fetch(this.readableId());
  }

  /** Like data(), blocking the JS thread until the value is there (DTORCH_READ_TIMEOUT_MS). */
  dataSync(): HostArray {
    return engine().fetchSync(this.readableId());
  }

  // A read whose host array would pass the largest ArrayBuffer of this Node (2^32 bytes on
  // Node 20) fails here: handing the addon's buffer to JS would abort the process.
  private readableId(): number {
    const id = this.id;
    const hostBytes = this.numel * (this.dtype === 'float16' || this.dtype === 'bfloat16' ? 4 : bytesPerElement(this.dtype));
    if (hostBytes > MAX_HOST_BYTES) {
      throw new DTorchError(
        ErrorCode.InvalidArgument,
        `${this.describe()} needs ${hostBytes} bytes on the host, more than a JS ArrayBuffer holds here (${MAX_HOST_BYTES}); read it in pieces (get, narrow)`,
      );
    }
    return id;
  }

  /** Nested JS arrays (int64 as numbers, bool as booleans). */
  async array(): Promise<NestedArray> {
    return toNested(await this.data(), this.shape, this.dtype);
  }

  /** Like {@link Tensor.array | array()}, blocking the JS thread until the value is there (DTORCH_READ_TIMEOUT_MS). */
  arraySync(): NestedArray {
    return toNested(this.dataSync(), this.shape, this.dtype);
  }

  /** The value of a one-element tensor. */
  async item(): Promise<number | boolean> {
    this.checkOneElement();
    return scalarOf(await this.data(), this.dtype);
  }

  /** Like {@link Tensor.item | item()}, blocking the JS thread until the value is there. */
  itemSync(): number | boolean {
    this.checkOneElement();
    return scalarOf(this.dataSync(), this.dtype);
  }

  private checkOneElement(): void {
    if (this.numel !== 1) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `item(): ${this.describe()} has ${this.numel} elements; item() needs exactly one`);
    }
  }

  // ---- ops ---------------------------------------------------------------------------------

  /** this + alpha * other, broadcast (see {@link @dtorch/api!add | add}). */
  add(other: Tensor | Scalar, options?: { alpha?: number }): Tensor {
    return elementwise.add(this, other, options);
  }
  /** this - alpha * other, broadcast (see {@link @dtorch/api!sub | sub}). */
  sub(other: Tensor | Scalar, options?: { alpha?: number }): Tensor {
    return elementwise.sub(this, other, options);
  }
  /** this * other, broadcast (see {@link @dtorch/api!mul | mul}). */
  mul(other: Tensor | Scalar): Tensor {
    return elementwise.mul(this, other);
  }
  /** this / other, true division (see {@link @dtorch/api!div | div}). */
  div(other: Tensor | Scalar): Tensor {
    return elementwise.div(this, other);
  }
  /** this to the power `exponent` (see {@link @dtorch/api!pow | pow}). */
  pow(exponent: Tensor | Scalar): Tensor {
    return elementwise.pow(this, exponent);
  }
  /** Elementwise minimum with `other` (see {@link @dtorch/api!minimum | minimum}). */
  minimum(other: Tensor | Scalar): Tensor {
    return elementwise.minimum(this, other);
  }
  /** Elementwise maximum with `other` (see {@link @dtorch/api!maximum | maximum}). */
  maximum(other: Tensor | Scalar): Tensor {
    return elementwise.maximum(this, other);
  }
  /** this == other as a bool tensor (see {@link @dtorch/api!eq | eq}). */
  eq(other: Tensor | Scalar): Tensor {
    return elementwise.eq(this, other);
  }
  /** this != other as a bool tensor (see {@link @dtorch/api!ne | ne}). */
  ne(other: Tensor | Scalar): Tensor {
    return elementwise.ne(this, other);
  }
  /** this < other as a bool tensor (see {@link @dtorch/api!lt | lt}). */
  lt(other: Tensor | Scalar): Tensor {
    return elementwise.lt(this, other);
  }
  /** this <= other as a bool tensor (see {@link @dtorch/api!le | le}). */
  le(other: Tensor | Scalar): Tensor {
    return elementwise.le(this, other);
  }
  /** this > other as a bool tensor (see {@link @dtorch/api!gt | gt}). */
  gt(other: Tensor | Scalar): Tensor {
    return elementwise.gt(this, other);
  }
  /** this >= other as a bool tensor (see {@link @dtorch/api!ge | ge}). */
  ge(other: Tensor | Scalar): Tensor {
    return elementwise.ge(this, other);
  }
  /** Logical and with `other` as a bool tensor (see {@link @dtorch/api!logicalAnd | logicalAnd}). */
  logicalAnd(other: Tensor | Scalar): Tensor {
    return elementwise.logicalAnd(this, other);
  }
  /** Logical or with `other` as a bool tensor (see {@link @dtorch/api!logicalOr | logicalOr}). */
  logicalOr(other: Tensor | Scalar): Tensor {
    return elementwise.logicalOr(this, other);
  }
  /** Logical not as a bool tensor (see {@link @dtorch/api!logicalNot | logicalNot}). */
  logicalNot(): Tensor {
    return elementwise.logicalNot(this);
  }
  /** Elements of this tensor where `condition` holds, else of `other` (torch.Tensor.where). */
  where(condition: Tensor, other: Tensor | Scalar): Tensor {
    return elementwise.where(condition, this, other);
  }
  /** This tensor with `value` where the bool `mask` holds (see {@link @dtorch/api!maskedFill | maskedFill}). */
  maskedFill(mask: Tensor, value: Scalar): Tensor {
    return elementwise.maskedFill(this, mask, value);
  }
  /** Clamps into [min, max], either bound optional (see {@link @dtorch/api!clamp | clamp}). */
  clamp(min?: number | null, max?: number | null): Tensor {
    return elementwise.clamp(this, min, max);
  }
  /** -this (see {@link @dtorch/api!neg | neg}). */
  neg(): Tensor {
    return elementwise.neg(this);
  }
  /** Absolute value (see {@link @dtorch/api!abs | abs}). */
  abs(): Tensor {
    return elementwise.abs(this);
  }
  /** max(this, 0) (see {@link @dtorch/api!relu | relu}). */
  relu(): Tensor {
    return elementwise.relu(this);
  }
  /** this * this (see {@link @dtorch/api!square | square}). */
  square(): Tensor {
    return elementwise.square(this);
  }
  /** Rounds down (see {@link @dtorch/api!floor | floor}). */
  floor(): Tensor {
    return elementwise.floor(this);
  }
  /** Rounds half to even (see {@link @dtorch/api!round | round}). */
  round(): Tensor {
    return elementwise.round(this);
  }
  /** e^x of each element (see {@link @dtorch/api!exp | exp}). */
  exp(): Tensor {
    return elementwise.exp(this);
  }
  /** Natural logarithm (see {@link @dtorch/api!log | log}). */
  log(): Tensor {
    return elementwise.log(this);
  }
  /** Base-2 logarithm (see {@link @dtorch/api!log2 | log2}). */
  log2(): Tensor {
    return elementwise.log2(this);
  }
  /** Square root (see {@link @dtorch/api!sqrt | sqrt}). */
  sqrt(): Tensor {
    return elementwise.sqrt(this);
  }
  /** 1 / sqrt(this) (see {@link @dtorch/api!rsqrt | rsqrt}). */
  rsqrt(): Tensor {
    return elementwise.rsqrt(this);
  }
  /** 1 / this (see {@link @dtorch/api!reciprocal | reciprocal}). */
  reciprocal(): Tensor {
    return elementwise.reciprocal(this);
  }
  /** Sine (see {@link @dtorch/api!sin | sin}). */
  sin(): Tensor {
    return elementwise.sin(this);
  }
  /** Cosine (see {@link @dtorch/api!cos | cos}). */
  cos(): Tensor {
    return elementwise.cos(this);
  }
  /** Logistic sigmoid (see {@link @dtorch/api!sigmoid | sigmoid}). */
  sigmoid(): Tensor {
    return elementwise.sigmoid(this);
  }
  /** Hyperbolic tangent (see {@link @dtorch/api!tanh | tanh}). */
  tanh(): Tensor {
    return elementwise.tanh(this);
  }
  /** this · sigmoid(this) (see {@link @dtorch/api!silu | silu}). */
  silu(): Tensor {
    return elementwise.silu(this);
  }
  /** this · sigmoid(1.702 this), CLIP's activation (see {@link @dtorch/api!quickGelu | quickGelu}). */
  quickGelu(): Tensor {
    return elementwise.quickGelu(this);
  }
  /** Whether each element is NaN, as a bool tensor (see {@link @dtorch/api!isnan | isnan}). */
  isnan(): Tensor {
    return elementwise.isnan(this);
  }
  /** Whether each element is infinite, as a bool tensor (see {@link @dtorch/api!isinf | isinf}). */
  isinf(): Tensor {
    return elementwise.isinf(this);
  }
  /** Matrix product this · other, as torch.matmul (see {@link @dtorch/api!matmul | matmul}). */
  matmul(other: Tensor): Tensor {
    return linalg.matmul(this, other);
  }
  /** Sum over `dim` (all dims when omitted); a sharded reduced dim gives Partial(sum) (see {@link @dtorch/api!sum | sum}). */
  sum(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.sum(this, dim, keepdim);
  }
  /** Mean over `dim` (all dims when omitted) (see {@link @dtorch/api!mean | mean}). */
  mean(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.mean(this, dim, keepdim);
  }
  /** Whether any element (along `dim`) is nonzero (see {@link @dtorch/api!any | any}). */
  any(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.any(this, dim, keepdim);
  }
  /** Whether every element (along `dim`) is nonzero (see {@link @dtorch/api!all | all}). */
  all(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.all(this, dim, keepdim);
  }
  /** The largest value, as a 0-d tensor (see {@link @dtorch/api!max | max}). */
  max(): Tensor;
  /** The largest values along `dim` and their indices (see {@link @dtorch/api!max | max}). */
  max(dim: number, keepdim?: boolean): reduction.ValuesIndices;
  max(dim?: number, keepdim = false): Tensor | reduction.ValuesIndices {
    return dim === undefined ? reduction.max(this) : reduction.max(this, dim, keepdim);
  }
  /** The smallest value, as a 0-d tensor (see {@link @dtorch/api!min | min}). */
  min(): Tensor;
  /** The smallest values along `dim` and their indices (see {@link @dtorch/api!min | min}). */
  min(dim: number, keepdim?: boolean): reduction.ValuesIndices;
  min(dim?: number, keepdim = false): Tensor | reduction.ValuesIndices {
    return dim === undefined ? reduction.min(this) : reduction.min(this, dim, keepdim);
  }
  /** Index of the largest value, in the flattened tensor or along `dim` (see {@link @dtorch/api!argmax | argmax}). */
  argmax(dim?: number, keepdim = false): Tensor {
    return reduction.argmax(this, dim, keepdim);
  }
  /** Softmax along `dim` (see {@link @dtorch/api!softmax | softmax}). */
  softmax(dim: number): Tensor {
    return reduction.softmax(this, dim);
  }
  /** log(softmax) along `dim` (see {@link @dtorch/api!logSoftmax | logSoftmax}). */
  logSoftmax(dim: number): Tensor {
    return reduction.logSoftmax(this, dim);
  }
  /** This tensor converted to `dtype` (see {@link @dtorch/api!to | to}). */
  to(dtype: DType): Tensor {
    return cast.to(this, dtype);
  }

  // ---- shape ---------------------------------------------------------------------------------

  /** The same elements in `shape`, one dim may be -1 (see {@link @dtorch/api!reshape | reshape}). */
  reshape(shape: readonly number[]): Tensor {
    return shapes.reshape(this, shape);
  }
  /** The same as {@link Tensor.reshape | reshape}, under torch.Tensor.view's name. */
  view(shape: readonly number[]): Tensor {
    return shapes.reshape(this, shape);
  }
  /** Merges dims `startDim`..`endDim` into one (see {@link @dtorch/api!flatten | flatten}). */
  flatten(startDim = 0, endDim = -1): Tensor {
    return shapes.flatten(this, startDim, endDim);
  }
  /** Splits dim `dim` into dims of `sizes` (see {@link @dtorch/api!unflatten | unflatten}). */
  unflatten(dim: number, sizes: readonly number[]): Tensor {
    return shapes.unflatten(this, dim, sizes);
  }
  /** Drops size-1 dims: all, or those listed (see {@link @dtorch/api!squeeze | squeeze}). */
  squeeze(dim?: number | readonly number[]): Tensor {
    return shapes.squeeze(this, dim);
  }
  /** Inserts a size-1 dim at `dim` (see {@link @dtorch/api!unsqueeze | unsqueeze}). */
  unsqueeze(dim: number): Tensor {
    return shapes.unsqueeze(this, dim);
  }
  /** Reorders the dims, as torch.Tensor.permute (see {@link @dtorch/api!permute | permute}). */
  permute(dims: readonly number[]): Tensor {
    return shapes.permute(this, dims);
  }
  /** Swaps dims `dim0` and `dim1` (see {@link @dtorch/api!transpose | transpose}). */
  transpose(dim0: number, dim1: number): Tensor {
    return shapes.transpose(this, dim0, dim1);
  }
  /** Size-1 dims repeated to `shape`, -1 keeping a dim (see {@link @dtorch/api!expand | expand}). */
  expand(shape: readonly number[]): Tensor {
    return shapes.expand(this, shape);
  }
  /** The values in a contiguous layout (see {@link @dtorch/api!contiguous | contiguous}). */
  contiguous(): Tensor {
    return shapes.contiguous(this);
  }
  /** A copy with its own memory (see {@link @dtorch/api!clone | clone}). */
  clone(): Tensor {
    return shapes.clone(this);
  }
  /** Pieces of `sizeOrSizes` along `dim` (see {@link @dtorch/api!split | split}). */
  split(sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
    return shapes.split(this, sizeOrSizes, dim);
  }
  /** At most `chunks` equal pieces along `dim`, as torch.chunk (see {@link @dtorch/api!chunk | chunk}). */
  chunk(chunks: number, dim = 0): Tensor[] {
    return shapes.chunk(this, chunks, dim);
  }
  /** The slices along `dim`, each without that dim (see {@link @dtorch/api!unbind | unbind}). */
  unbind(dim = 0): Tensor[] {
    return shapes.unbind(this, dim);
  }
  /** `length` elements from `start` along `dim` (see {@link @dtorch/api!narrow | narrow}). */
  narrow(dim: number, start: number, length: number): Tensor {
    return shapes.narrow(this, dim, start, length);
  }
  /** The entries along `dim` at the positions in `index` (see {@link @dtorch/api!indexSelect | indexSelect}). */
  indexSelect(dim: number, index: Tensor): Tensor {
    return shapes.indexSelect(this, dim, index);
  }
  /** Tiles the tensor `repeats[d]` times along each dim (see {@link @dtorch/api!repeat | repeat}). */
  repeat(...repeats: number[]): Tensor {
    return shapes.repeat(this, repeats);
  }
  /** Repeats each element `repeats` times along `dim` (see {@link @dtorch/api!repeatInterleave | repeatInterleave}). */
  repeatInterleave(repeats: number, dim?: number): Tensor {
    return shapes.repeatInterleave(this, repeats, dim);
  }
  /** x[...]: integers, dt.slice(start, end, step), null (new axis), '...', int tensors. */
  get(...indices: shapes.Index[]): Tensor {
    return shapes.get(this, ...indices);
  }
  /** x[...] = value; the last argument is the value. Returns this tensor, now updated. */
  set(...indicesAndValue: [...shapes.Index[], Tensor | number | boolean]): Tensor {
    return shapes.set(this, ...indicesAndValue);
  }

  // ---- distribution ------------------------------------------------------------------------

  /** The same values with new placements, on this mesh or `mesh` (see dt.redistribute). */
  redistribute(placements: readonly Placement[]): Tensor;
  redistribute(mesh: DeviceMesh, placements: readonly Placement[]): Tensor;
  redistribute(meshOrPlacements: DeviceMesh | readonly Placement[], placements?: readonly Placement[]): Tensor {
    return movement.redistribute(this, meshOrPlacements, placements);
  }
  /** Shape of rank `rank`'s piece (torch.chunk sizes along sharded dims; may be empty). */
  localShape(rank: number): number[] {
    return movement.localShape(this, rank);
  }
  /** The shape of every rank's piece, in rank order (see {@link Tensor.localShape | localShape}). */
  localShapes(): number[][] {
    return movement.localShapes(this);
  }
  /** Rank `rank`'s piece, as a tensor of its own on that rank's device. */
  toLocal(rank: number): Tensor {
    return movement.toLocal(this, rank);
  }

  // ---- printing ----------------------------------------------------------------------------

  /** A one-line summary without the mesh, e.g. `Tensor(shape=[4, 8], dtype=float32, placements=[S(0)])`. */
  describe(): string {
    return `Tensor(shape=${formatShape(this.shape)}, dtype=${this.dtype}, placements=${formatPlacements(this.placements)})`;
  }

  /** {@link Tensor.describe | describe()} with the mesh, and ', disposed' once disposed. */
  toString(): string {
    return `${this.describe().slice(0, -1)}, mesh=${this.mesh}${this.#disposed ? ', disposed' : ''})`;
  }
}

/** Whether `value` is a {@link Tensor} (disposed or not). */
export function isTensor(value: unknown): value is Tensor {
  return value instanceof Tensor;
}
setTensorCheck(isTensor);

function scalarOf(data: HostArray, dtype: DType): number | boolean {
  const v = data[0]!;
  if (dtype === 'bool') return v !== 0;
  return typeof v === 'bigint' ? Number(v) : v;
}

function toNested(data: HostArray, shape: readonly number[], dtype: DType): NestedArray {
  // an empty tensor may still have huge dims before its zero one ([2^40, 0]): one JS array each
  let arrays = 0;
  for (let d = 0, rows = 1; d < shape.length - 1 && rows > 0; d++) arrays += rows *= shape[d]!;
  if (arrays > 2 ** 28) {
    throw new DTorchError(ErrorCode.InvalidArgument, `array(): shape ${formatShape(shape)} needs ${arrays} nested JS arrays; read it with data()`);
  }
  const at = (i: number): number | boolean => {
    const v = data[i]!;
    if (dtype === 'bool') return v !== 0;
    return typeof v === 'bigint' ? Number(v) : v;
  };
  if (shape.length === 0) return at(0);
  let offset = 0;
  const build = (dim: number): NestedArray[] => {
    const size = shape[dim]!;
    const row: NestedArray[] = new Array(size);
    for (let i = 0; i < size; i++) row[i] = dim === shape.length - 1 ? at(offset++) : build(dim + 1);
    return row;
  };
  return build(0);
}
