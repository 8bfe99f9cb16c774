// Tensor: the client-side symbol of a distributed tensor. It holds metadata (shape, dtype,
// mesh, one placement per mesh dim) and an engine id, never data; values are read with
// data()/array()/item() (async) or dataSync(). Its op methods call the op functions: most are
// written from them (scripts/gen-tensor-methods.mjs), the few whose arguments differ by hand.
import { constants as bufferConstants } from 'node:buffer';
import { DTorchError, ErrorCode, formatShape } from '@dtorch/common';
import { engine, type HostArray } from '@dtorch/core';
import type { DeviceMesh } from './device_mesh.js';
import { bytesPerElement, type DType } from './dtype.js';
import { formatPlacements, type Placement } from './placement.js';
import { setTensorCheck, trackTensor } from './scope.js';
import * as elementwise from './ops/elementwise.js';
import * as activation from './ops/activation.js';
import * as linalg from './ops/linalg.js';
import * as reduction from './ops/reduction.js';
import * as cast from './ops/cast.js';
import * as shapes from './ops/shape.js';
import * as movement from './ops/redistribute.js';

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

  /** The full tensor, row-major (float16/bfloat16/float8 as Float32Array, int64 as BigInt64Array, bool as Uint8Array). */
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
    const widened = this.dtype === 'float16' || this.dtype === 'bfloat16' || this.dtype === 'float8_e4m3fn' || this.dtype === 'float8_e5m2';
    const hostBytes = this.numel * (widened ? 4 : bytesPerElement(this.dtype));
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

  // ---- ops whose arguments differ from their function's, written by hand ------------------

  /** Elements of this tensor where `condition` holds, else of `other` (torch.Tensor.where). */
  where(condition: Tensor, other: Tensor | Scalar): Tensor {
    return elementwise.where(condition, this, other);
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
  /** Tiles the tensor `repeats[d]` times along each dim (see {@link @dtorch/api!repeat | repeat}). */
  repeat(...repeats: number[]): Tensor {
    return shapes.repeat(this, repeats);
  }
  /** The same values with new placements, on this mesh or `mesh` (see dt.redistribute). */
  redistribute(placements: readonly Placement[]): Tensor;
  redistribute(mesh: DeviceMesh, placements: readonly Placement[]): Tensor;
  redistribute(meshOrPlacements: DeviceMesh | readonly Placement[], placements?: readonly Placement[]): Tensor {
    return movement.redistribute(this, meshOrPlacements, placements);
  }

  // ---- ops: written by scripts/gen-tensor-methods.mjs from the op functions (ops/*.ts); do not edit ----
  /**
   * -x, as torch.neg; same dtype (bool refused). Partial(sum/avg) stays partial.
   * `x.neg()` is {@link @dtorch/api!neg | neg}(x).
   */
  neg(): Tensor {
    return elementwise.neg(this);
  }
  /**
   * |x|, as torch.abs; same dtype (bool refused).
   * `x.abs()` is {@link @dtorch/api!abs | abs}(x).
   */
  abs(): Tensor {
    return elementwise.abs(this);
  }
  /**
   * x * x, as torch.square; same dtype, bool giving int64.
   * `x.square()` is {@link @dtorch/api!square | square}(x).
   */
  square(): Tensor {
    return elementwise.square(this);
  }
  /**
   * Rounds down, as torch.floor; same dtype (bool refused).
   * `x.floor()` is {@link @dtorch/api!floor | floor}(x).
   */
  floor(): Tensor {
    return elementwise.floor(this);
  }
  /**
   * Rounds half to even, as torch.round.
   * `x.round()` is {@link @dtorch/api!round | round}(x).
   */
  round(): Tensor {
    return elementwise.round(this);
  }
  /**
   * e^x, as torch.exp; integer and bool inputs give float32.
   * `x.exp()` is {@link @dtorch/api!exp | exp}(x).
   */
  exp(): Tensor {
    return elementwise.exp(this);
  }
  /**
   * Natural logarithm, as torch.log; integer and bool inputs give float32.
   * `x.log()` is {@link @dtorch/api!log | log}(x).
   */
  log(): Tensor {
    return elementwise.log(this);
  }
  /**
   * Base-2 logarithm, as torch.log2; integer and bool inputs give float32.
   * `x.log2()` is {@link @dtorch/api!log2 | log2}(x).
   */
  log2(): Tensor {
    return elementwise.log2(this);
  }
  /**
   * Square root, as torch.sqrt; integer and bool inputs give float32.
   * `x.sqrt()` is {@link @dtorch/api!sqrt | sqrt}(x).
   */
  sqrt(): Tensor {
    return elementwise.sqrt(this);
  }
  /**
   * 1 / sqrt(x), as torch.rsqrt; integer and bool inputs give float32.
   * `x.rsqrt()` is {@link @dtorch/api!rsqrt | rsqrt}(x).
   */
  rsqrt(): Tensor {
    return elementwise.rsqrt(this);
  }
  /**
   * 1 / x, as torch.reciprocal; integer and bool inputs give float32.
   * `x.reciprocal()` is {@link @dtorch/api!reciprocal | reciprocal}(x).
   */
  reciprocal(): Tensor {
    return elementwise.reciprocal(this);
  }
  /**
   * Sine (radians), as torch.sin; integer and bool inputs give float32.
   * `x.sin()` is {@link @dtorch/api!sin | sin}(x).
   */
  sin(): Tensor {
    return elementwise.sin(this);
  }
  /**
   * Cosine (radians), as torch.cos; integer and bool inputs give float32.
   * `x.cos()` is {@link @dtorch/api!cos | cos}(x).
   */
  cos(): Tensor {
    return elementwise.cos(this);
  }
  /**
   * Whether each element is NaN: a bool tensor, as torch.isnan.
   * `x.isnan()` is {@link @dtorch/api!isnan | isnan}(x).
   */
  isnan(): Tensor {
    return elementwise.isnan(this);
  }
  /**
   * Whether each element is +inf or -inf: a bool tensor, as torch.isinf.
   * `x.isinf()` is {@link @dtorch/api!isinf | isinf}(x).
   */
  isinf(): Tensor {
    return elementwise.isinf(this);
  }
  /**
   * Logical not (zero is false): a bool tensor, as torch.logical_not.
   * `x.logicalNot()` is {@link @dtorch/api!logicalNot | logicalNot}(x).
   */
  logicalNot(): Tensor {
    return elementwise.logicalNot(this);
  }
  /**
   * Clamps into [min, max]; either bound may be left out (null or undefined). As torch.clamp, a
   * fractional bound makes an integer tensor's result float32, and a bound the result dtype
   * cannot hold is refused.
   * `x.clamp(min, max)` is {@link @dtorch/api!clamp | clamp}(x, min, max).
   */
  clamp(min?: number | null, max?: number | null): Tensor {
    return elementwise.clamp(this, min, max);
  }
  /**
   * a + alpha * other, broadcast, with PyTorch type promotion, as torch.add (alpha default 1).
   * Shards pass through (a Replicate operand beside a Shard is sliced locally); Partial(sum/avg)
   * plus the same Partial stays partial.
   * `a.add(other, options)` is {@link @dtorch/api!add | add}(a, other, options).
   */
  add(other: elementwise.Operand, options?: { alpha?: number }): Tensor {
    return elementwise.add(this, other, options);
  }
  /**
   * a - alpha * other, broadcast, as torch.sub (alpha default 1); Partial minus Partial stays
   * partial, bool operands are refused.
   * `a.sub(other, options)` is {@link @dtorch/api!sub | sub}(a, other, options).
   */
  sub(other: elementwise.Operand, options?: { alpha?: number }): Tensor {
    return elementwise.sub(this, other, options);
  }
  /**
   * a * other, broadcast, with PyTorch type promotion, as torch.mul. A Partial(sum/avg) operand
   * times a Replicate one or a scalar stays partial.
   * `a.mul(other)` is {@link @dtorch/api!mul | mul}(a, other).
   */
  mul(other: elementwise.Operand): Tensor {
    return elementwise.mul(this, other);
  }
  /**
   * True division: integer operands give float32.
   * `a.div(other)` is {@link @dtorch/api!div | div}(a, other).
   */
  div(other: elementwise.Operand): Tensor {
    return elementwise.div(this, other);
  }
  /**
   * a to the power `exponent`, broadcast, as torch.pow; integers to negative integer powers and
   * bool tensors are refused.
   * `a.pow(exponent)` is {@link @dtorch/api!pow | pow}(a, exponent).
   */
  pow(exponent: elementwise.Operand): Tensor {
    return elementwise.pow(this, exponent);
  }
  /**
   * Elementwise minimum, broadcast, as torch.minimum (NaN wins).
   * `a.minimum(other)` is {@link @dtorch/api!minimum | minimum}(a, other).
   */
  minimum(other: elementwise.Operand): Tensor {
    return elementwise.minimum(this, other);
  }
  /**
   * Elementwise maximum, broadcast, as torch.maximum (NaN wins).
   * `a.maximum(other)` is {@link @dtorch/api!maximum | maximum}(a, other).
   */
  maximum(other: elementwise.Operand): Tensor {
    return elementwise.maximum(this, other);
  }
  /**
   * a == other, broadcast: a bool tensor, as torch.eq.
   * `a.eq(other)` is {@link @dtorch/api!eq | eq}(a, other).
   */
  eq(other: elementwise.Operand): Tensor {
    return elementwise.eq(this, other);
  }
  /**
   * a != other, broadcast: a bool tensor, as torch.ne.
   * `a.ne(other)` is {@link @dtorch/api!ne | ne}(a, other).
   */
  ne(other: elementwise.Operand): Tensor {
    return elementwise.ne(this, other);
  }
  /**
   * a < other, broadcast: a bool tensor, as torch.lt.
   * `a.lt(other)` is {@link @dtorch/api!lt | lt}(a, other).
   */
  lt(other: elementwise.Operand): Tensor {
    return elementwise.lt(this, other);
  }
  /**
   * a <= other, broadcast: a bool tensor, as torch.le.
   * `a.le(other)` is {@link @dtorch/api!le | le}(a, other).
   */
  le(other: elementwise.Operand): Tensor {
    return elementwise.le(this, other);
  }
  /**
   * a > other, broadcast: a bool tensor, as torch.gt.
   * `a.gt(other)` is {@link @dtorch/api!gt | gt}(a, other).
   */
  gt(other: elementwise.Operand): Tensor {
    return elementwise.gt(this, other);
  }
  /**
   * a >= other, broadcast: a bool tensor, as torch.ge.
   * `a.ge(other)` is {@link @dtorch/api!ge | ge}(a, other).
   */
  ge(other: elementwise.Operand): Tensor {
    return elementwise.ge(this, other);
  }
  /**
   * a and other (zero is false), broadcast: a bool tensor, as torch.logical_and.
   * `a.logicalAnd(other)` is {@link @dtorch/api!logicalAnd | logicalAnd}(a, other).
   */
  logicalAnd(other: elementwise.Operand): Tensor {
    return elementwise.logicalAnd(this, other);
  }
  /**
   * a or other (zero is false), broadcast: a bool tensor, as torch.logical_or.
   * `a.logicalOr(other)` is {@link @dtorch/api!logicalOr | logicalOr}(a, other).
   */
  logicalOr(other: elementwise.Operand): Tensor {
    return elementwise.logicalOr(this, other);
  }
  /**
   * `x` with `value` where `mask` (broadcast to x's shape) holds; a value x's dtype cannot hold is
   * refused.
   * `x.maskedFill(mask, value)` is {@link @dtorch/api!maskedFill | maskedFill}(x, mask, value).
   */
  maskedFill(mask: Tensor, value: Scalar): Tensor {
    return elementwise.maskedFill(this, mask, value);
  }
  /**
   * max(x, 0), as torch.relu; same dtype (bool refused).
   * `x.relu()` is {@link @dtorch/api!relu | relu}(x).
   */
  relu(): Tensor {
    return activation.relu(this);
  }
  /**
   * Hyperbolic tangent, as torch.tanh; integer and bool inputs give float32.
   * `x.tanh()` is {@link @dtorch/api!tanh | tanh}(x).
   */
  tanh(): Tensor {
    return activation.tanh(this);
  }
  /**
   * 1 / (1 + e^-x), as torch.sigmoid; integer and bool inputs give float32.
   * `x.sigmoid()` is {@link @dtorch/api!sigmoid | sigmoid}(x).
   */
  sigmoid(): Tensor {
    return activation.sigmoid(this);
  }
  /**
   * x · sigmoid(x) of a floating tensor, as torch.nn.functional.silu; same dtype.
   * `x.silu()` is {@link @dtorch/api!silu | silu}(x).
   */
  silu(): Tensor {
    return activation.silu(this);
  }
  /**
   * x · sigmoid(1.702 x): CLIP's activation (transformers' QuickGELUActivation), as one op.
   * `x.quickGelu()` is {@link @dtorch/api!quickGelu | quickGelu}(x).
   */
  quickGelu(): Tensor {
    return activation.quickGelu(this);
  }
  /**
   * Softmax along `dim`; other dims may be sharded.
   * `x.softmax(dim)` is {@link @dtorch/api!softmax | softmax}(x, dim).
   */
  softmax(dim: number): Tensor {
    return activation.softmax(this, dim);
  }
  /**
   * log(softmax(x)) along `dim`, computed stably, as torch.log_softmax; other dims may be sharded.
   * `x.logSoftmax(dim)` is {@link @dtorch/api!logSoftmax | logSoftmax}(x, dim).
   */
  logSoftmax(dim: number): Tensor {
    return activation.logSoftmax(this, dim);
  }
  /**
   * Matrix product with torch.matmul's rules: 1-D operands act as a row or column vector, batch
   * dims broadcast. Rows of `a` sharded give rows of the result sharded, columns of `other`
   * sharded give columns sharded, and the inner dim sharded on both (or on one, the other
   * Replicate) gives Partial(sum).
   * `a.matmul(other)` is {@link @dtorch/api!matmul | matmul}(a, other).
   */
  matmul(other: Tensor): Tensor {
    return linalg.matmul(this, other);
  }
  /**
   * Sum over `dim` (all dims when omitted); integer and bool inputs give int64, as in PyTorch.
   * Summing a sharded dim leaves a Partial(sum) result: no communication until it is read or
   * redistributed.
   * `x.sum(dim, keepdim)` is {@link @dtorch/api!sum | sum}(x, dim, keepdim).
   */
  sum(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.sum(this, dim, keepdim);
  }
  /**
   * Mean over `dim` (all dims when omitted) of a floating tensor; a sharded reduced dim gives
   * Partial(sum).
   * `x.mean(dim, keepdim)` is {@link @dtorch/api!mean | mean}(x, dim, keepdim).
   */
  mean(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.mean(this, dim, keepdim);
  }
  /**
   * Whether any element (along `dim`) is true/nonzero: bool (uint8 for uint8 input, as torch.any).
   * `x.any(dim, keepdim)` is {@link @dtorch/api!any | any}(x, dim, keepdim).
   */
  any(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.any(this, dim, keepdim);
  }
  /**
   * Whether every element (along `dim`) is true/nonzero: bool (uint8 for uint8 input, as torch.all).
   * `x.all(dim, keepdim)` is {@link @dtorch/api!all | all}(x, dim, keepdim).
   */
  all(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.all(this, dim, keepdim);
  }
  /**
   * Index of the largest value: in the flattened tensor, or along `dim`.
   * `x.argmax(dim, keepdim)` is {@link @dtorch/api!argmax | argmax}(x, dim, keepdim).
   */
  argmax(dim?: number, keepdim = false): Tensor {
    return reduction.argmax(this, dim, keepdim);
  }
  /**
   * `x` converted to `dtype`, as torch.Tensor.to(dtype): floats to integers truncate, as PyTorch
   * casts; shape and placements unchanged.
   * `x.to(dtype)` is {@link @dtorch/api!to | to}(x, dtype).
   */
  to(dtype: DType): Tensor {
    return cast.to(this, dtype);
  }
  /**
   * The same elements in `shape` (one dim may be -1).
   * `x.reshape(shape)` is {@link @dtorch/api!reshape | reshape}(x, shape).
   */
  reshape(shape: readonly number[]): Tensor {
    return shapes.reshape(this, shape);
  }
  /**
   * The same op as {@link reshape}, under torch.Tensor.view's name (any tensor can be viewed).
   * `x.view(shape)` is {@link @dtorch/api!view | view}(x, shape).
   */
  view(shape: readonly number[]): Tensor {
    return shapes.view(this, shape);
  }
  /**
   * Merges dims `startDim`..`endDim` (default: all) into one, as torch.flatten; a 0-d tensor gives
   * shape [1].
   * `x.flatten(startDim, endDim)` is {@link @dtorch/api!flatten | flatten}(x, startDim, endDim).
   */
  flatten(startDim = 0, endDim = -1): Tensor {
    return shapes.flatten(this, startDim, endDim);
  }
  /**
   * Splits dim `dim` into dims of `sizes` (their product its size; one may be -1), as torch.unflatten.
   * `x.unflatten(dim, sizes)` is {@link @dtorch/api!unflatten | unflatten}(x, dim, sizes).
   */
  unflatten(dim: number, sizes: readonly number[]): Tensor {
    return shapes.unflatten(this, dim, sizes);
  }
  /**
   * Drops size-1 dims: all of them, or those listed.
   * `x.squeeze(dim)` is {@link @dtorch/api!squeeze | squeeze}(x, dim).
   */
  squeeze(dim?: number | readonly number[]): Tensor {
    return shapes.squeeze(this, dim);
  }
  /**
   * Inserts a size-1 dim at `dim` (in [-ndim-1, ndim]), as torch.unsqueeze.
   * `x.unsqueeze(dim)` is {@link @dtorch/api!unsqueeze | unsqueeze}(x, dim).
   */
  unsqueeze(dim: number): Tensor {
    return shapes.unsqueeze(this, dim);
  }
  /**
   * Reorders the dims: dim i of the result is dim `dims[i]` of `x`, as torch.permute; a sharded dim
   * stays sharded where it moves.
   * `x.permute(dims)` is {@link @dtorch/api!permute | permute}(x, dims).
   */
  permute(dims: readonly number[]): Tensor {
    return shapes.permute(this, dims);
  }
  /**
   * Swaps dims `dim0` and `dim1`, as torch.transpose.
   * `x.transpose(dim0, dim1)` is {@link @dtorch/api!transpose | transpose}(x, dim0, dim1).
   */
  transpose(dim0: number, dim1: number): Tensor {
    return shapes.transpose(this, dim0, dim1);
  }
  /**
   * A view with size-1 dims repeated to `shape` (-1 keeps a dim).
   * `x.expand(shape)` is {@link @dtorch/api!expand | expand}(x, shape).
   */
  expand(shape: readonly number[]): Tensor {
    return shapes.expand(this, shape);
  }
  /**
   * The values in a row-major contiguous layout, as torch.Tensor.contiguous; always a new tensor.
   * `x.contiguous()` is {@link @dtorch/api!contiguous | contiguous}(x).
   */
  contiguous(): Tensor {
    return shapes.contiguous(this);
  }
  /**
   * A copy with its own memory, as torch.clone.
   * `x.clone()` is {@link @dtorch/api!clone | clone}(x).
   */
  clone(): Tensor {
    return shapes.clone(this);
  }
  /**
   * Pieces of `sizeOrSizes` along `dim` (the last may be shorter), as torch.split.
   * `x.split(sizeOrSizes, dim)` is {@link @dtorch/api!split | split}(x, sizeOrSizes, dim).
   */
  split(sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
    return shapes.split(this, sizeOrSizes, dim);
  }
  /**
   * torch.chunk: pieces of ceil(size / chunks) along `dim`; there may be fewer than `chunks`.
   * `x.chunk(chunks, dim)` is {@link @dtorch/api!chunk | chunk}(x, chunks, dim).
   */
  chunk(chunks: number, dim = 0): Tensor[] {
    return shapes.chunk(this, chunks, dim);
  }
  /**
   * The slices along `dim`, each without that dim.
   * `x.unbind(dim)` is {@link @dtorch/api!unbind | unbind}(x, dim).
   */
  unbind(dim = 0): Tensor[] {
    return shapes.unbind(this, dim);
  }
  /**
   * `length` elements from `start` along `dim`, as torch.narrow: a negative start counts from the
   * end; the range must lie inside the dim.
   * `x.narrow(dim, start, length)` is {@link @dtorch/api!narrow | narrow}(x, dim, start, length).
   */
  narrow(dim: number, start: number, length: number): Tensor {
    return shapes.narrow(this, dim, start, length);
  }
  /**
   * The entries of `x` along `dim` at the positions in `index` (1-d int64 or int32, Replicate), as
   * torch.index_select; shards of other dims and partials pass.
   * `x.indexSelect(dim, index)` is {@link @dtorch/api!indexSelect | indexSelect}(x, dim, index).
   */
  indexSelect(dim: number, index: Tensor): Tensor {
    return shapes.indexSelect(this, dim, index);
  }
  /**
   * Repeats each element `repeats` times along `dim` (flattened when no dim), as
   * torch.repeat_interleave.
   * `x.repeatInterleave(repeats, dim)` is {@link @dtorch/api!repeatInterleave | repeatInterleave}(x, repeats, dim).
   */
  repeatInterleave(repeats: number, dim?: number): Tensor {
    return shapes.repeatInterleave(this, repeats, dim);
  }
  /**
   * x[...] as PyTorch indexes: integers drop their dim, slices keep it, null adds a size-1 dim,
   * '...' stands for the dims not indexed, an int tensor selects along its dim.
   * `x.get(...indices)` is {@link @dtorch/api!get | get}(x, ...indices).
   */
  get(...indices: shapes.Index[]): Tensor {
    return shapes.get(this, ...indices);
  }
  /**
   * x[...] = value, as PyTorch assigns: the indices are integers, dt.slice() ranges and '...', or
   * full ranges then one int64 index tensor; value (a tensor or a number) broadcasts to the indexed
   * region. Tensors are values in DTorch: `x` afterwards refers to the updated tensor (its old value
   * is released). A call that throws leaves `x` as it was; an index tensor is read here (its
   * values wait for it) so that an index out of range throws now instead of spoiling `x`.
   * `x.set(...indicesAndValue)` is {@link @dtorch/api!set | set}(x, ...indicesAndValue).
   */
  set(...indicesAndValue: [...shapes.Index[], Tensor | number | boolean]): Tensor {
    return shapes.set(this, ...indicesAndValue);
  }
  /**
   * Rank `rank`'s piece as a tensor of its own, on a 1-device mesh of that rank's device.
   * `x.toLocal(rank)` is {@link @dtorch/api!toLocal | toLocal}(x, rank).
   */
  toLocal(rank: number): Tensor {
    return movement.toLocal(this, rank);
  }
  /**
   * Shape of rank `rank`'s piece (torch.chunk sizes; may be empty).
   * `x.localShape(rank)` is {@link @dtorch/api!localShape | localShape}(x, rank).
   */
  localShape(rank: number): number[] {
    return movement.localShape(this, rank);
  }
  /**
   * The shape of every rank's piece, in rank order (see {@link localShape}).
   * `x.localShapes()` is {@link @dtorch/api!localShapes | localShapes}(x).
   */
  localShapes(): number[][] {
    return movement.localShapes(this);
  }
  // ---- end of the written ops ----

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
