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

export type Scalar = number | boolean;
export type NestedArray = number | boolean | bigint | NestedArray[];

export class Tensor {
  #id: number;
  #disposed = false;
  // eslint-disable-next-line no-unused-private-class-members -- written only: it keeps the adopted tensor alive (see adopt())
  #adoptedFrom: Tensor | undefined;
  /** Set by keep(): no tidy() frees this tensor. */
  kept = false;
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly mesh: DeviceMesh;
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

  get isDisposed(): boolean {
    return this.#disposed;
  }

  get ndim(): number {
    return this.shape.length;
  }

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

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    engine().release(this.#id);
  }

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

  arraySync(): NestedArray {
    return toNested(this.dataSync(), this.shape, this.dtype);
  }

  /** The value of a one-element tensor. */
  async item(): Promise<number | boolean> {
    this.checkOneElement();
    return scalarOf(await this.data(), this.dtype);
  }

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

  add(other: Tensor | Scalar, options?: { alpha?: number }): Tensor {
    return elementwise.add(this, other, options);
  }
  sub(other: Tensor | Scalar, options?: { alpha?: number }): Tensor {
    return elementwise.sub(this, other, options);
  }
  mul(other: Tensor | Scalar): Tensor {
    return elementwise.mul(this, other);
  }
  div(other: Tensor | Scalar): Tensor {
    return elementwise.div(this, other);
  }
  pow(exponent: Tensor | Scalar): Tensor {
    return elementwise.pow(this, exponent);
  }
  minimum(other: Tensor | Scalar): Tensor {
    return elementwise.minimum(this, other);
  }
  maximum(other: Tensor | Scalar): Tensor {
    return elementwise.maximum(this, other);
  }
  eq(other: Tensor | Scalar): Tensor {
    return elementwise.eq(this, other);
  }
  ne(other: Tensor | Scalar): Tensor {
    return elementwise.ne(this, other);
  }
  lt(other: Tensor | Scalar): Tensor {
    return elementwise.lt(this, other);
  }
  le(other: Tensor | Scalar): Tensor {
    return elementwise.le(this, other);
  }
  gt(other: Tensor | Scalar): Tensor {
    return elementwise.gt(this, other);
  }
  ge(other: Tensor | Scalar): Tensor {
    return elementwise.ge(this, other);
  }
  logicalAnd(other: Tensor | Scalar): Tensor {
    return elementwise.logicalAnd(this, other);
  }
  logicalOr(other: Tensor | Scalar): Tensor {
    return elementwise.logicalOr(this, other);
  }
  logicalNot(): Tensor {
    return elementwise.logicalNot(this);
  }
  /** Elements of this tensor where `condition` holds, else of `other` (torch.Tensor.where). */
  where(condition: Tensor, other: Tensor | Scalar): Tensor {
    return elementwise.where(condition, this, other);
  }
  maskedFill(mask: Tensor, value: Scalar): Tensor {
    return elementwise.maskedFill(this, mask, value);
  }
  clamp(min?: number | null, max?: number | null): Tensor {
    return elementwise.clamp(this, min, max);
  }
  neg(): Tensor {
    return elementwise.neg(this);
  }
  abs(): Tensor {
    return elementwise.abs(this);
  }
  relu(): Tensor {
    return elementwise.relu(this);
  }
  square(): Tensor {
    return elementwise.square(this);
  }
  floor(): Tensor {
    return elementwise.floor(this);
  }
  round(): Tensor {
    return elementwise.round(this);
  }
  exp(): Tensor {
    return elementwise.exp(this);
  }
  log(): Tensor {
    return elementwise.log(this);
  }
  log2(): Tensor {
    return elementwise.log2(this);
  }
  sqrt(): Tensor {
    return elementwise.sqrt(this);
  }
  rsqrt(): Tensor {
    return elementwise.rsqrt(this);
  }
  reciprocal(): Tensor {
    return elementwise.reciprocal(this);
  }
  sin(): Tensor {
    return elementwise.sin(this);
  }
  cos(): Tensor {
    return elementwise.cos(this);
  }
  sigmoid(): Tensor {
    return elementwise.sigmoid(this);
  }
  tanh(): Tensor {
    return elementwise.tanh(this);
  }
  silu(): Tensor {
    return elementwise.silu(this);
  }
  quickGelu(): Tensor {
    return elementwise.quickGelu(this);
  }
  isnan(): Tensor {
    return elementwise.isnan(this);
  }
  isinf(): Tensor {
    return elementwise.isinf(this);
  }
  matmul(other: Tensor): Tensor {
    return linalg.matmul(this, other);
  }
  sum(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.sum(this, dim, keepdim);
  }
  mean(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.mean(this, dim, keepdim);
  }
  any(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.any(this, dim, keepdim);
  }
  all(dim?: number | readonly number[], keepdim = false): Tensor {
    return reduction.all(this, dim, keepdim);
  }
  max(): Tensor;
  max(dim: number, keepdim?: boolean): reduction.ValuesIndices;
  max(dim?: number, keepdim = false): Tensor | reduction.ValuesIndices {
    return dim === undefined ? reduction.max(this) : reduction.max(this, dim, keepdim);
  }
  min(): Tensor;
  min(dim: number, keepdim?: boolean): reduction.ValuesIndices;
  min(dim?: number, keepdim = false): Tensor | reduction.ValuesIndices {
    return dim === undefined ? reduction.min(this) : reduction.min(this, dim, keepdim);
  }
  argmax(dim?: number, keepdim = false): Tensor {
    return reduction.argmax(this, dim, keepdim);
  }
  softmax(dim: number): Tensor {
    return reduction.softmax(this, dim);
  }
  logSoftmax(dim: number): Tensor {
    return reduction.logSoftmax(this, dim);
  }
  to(dtype: DType): Tensor {
    return cast.to(this, dtype);
  }

  // ---- shape ---------------------------------------------------------------------------------

  reshape(shape: readonly number[]): Tensor {
    return shapes.reshape(this, shape);
  }
  view(shape: readonly number[]): Tensor {
    return shapes.reshape(this, shape);
  }
  flatten(startDim = 0, endDim = -1): Tensor {
    return shapes.flatten(this, startDim, endDim);
  }
  unflatten(dim: number, sizes: readonly number[]): Tensor {
    return shapes.unflatten(this, dim, sizes);
  }
  squeeze(dim?: number | readonly number[]): Tensor {
    return shapes.squeeze(this, dim);
  }
  unsqueeze(dim: number): Tensor {
    return shapes.unsqueeze(this, dim);
  }
  permute(dims: readonly number[]): Tensor {
    return shapes.permute(this, dims);
  }
  transpose(dim0: number, dim1: number): Tensor {
    return shapes.transpose(this, dim0, dim1);
  }
  expand(shape: readonly number[]): Tensor {
    return shapes.expand(this, shape);
  }
  contiguous(): Tensor {
    return shapes.contiguous(this);
  }
  clone(): Tensor {
    return shapes.clone(this);
  }
  split(sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
    return shapes.split(this, sizeOrSizes, dim);
  }
  chunk(chunks: number, dim = 0): Tensor[] {
    return shapes.chunk(this, chunks, dim);
  }
  unbind(dim = 0): Tensor[] {
    return shapes.unbind(this, dim);
  }
  narrow(dim: number, start: number, length: number): Tensor {
    return shapes.narrow(this, dim, start, length);
  }
  indexSelect(dim: number, index: Tensor): Tensor {
    return shapes.indexSelect(this, dim, index);
  }
  repeat(...repeats: number[]): Tensor {
    return shapes.repeat(this, repeats);
  }
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
  localShapes(): number[][] {
    return movement.localShapes(this);
  }
  /** Rank `rank`'s piece, as a tensor of its own on that rank's device. */
  toLocal(rank: number): Tensor {
    return movement.toLocal(this, rank);
  }

  // ---- printing ----------------------------------------------------------------------------

  describe(): string {
    return `Tensor(shape=${formatShape(this.shape)}, dtype=${this.dtype}, placements=${formatPlacements(this.placements)})`;
  }

  toString(): string {
    return `${this.describe().slice(0, -1)}, mesh=${this.mesh}${this.#disposed ? ', disposed' : ''})`;
  }
}

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
