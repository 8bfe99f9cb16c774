// Turning what the engine recorded (its `out` buffer) into Tensors, and writing the common
// attribute layouts into its `args` buffer.
import { invalidParameter } from '@dtorch/common';
import { engine, type OpAttrs, type OpName } from '@dtorch/core';
import type { DeviceMesh } from './device_mesh.js';
import type { DType } from './dtype.js';
import { placementFromCode, type Placement } from './placement.js';
import { Tensor } from './tensor.js';

// 1-D meshes are the common case: reuse one frozen placements array per code.
const singlePlacements = new Map<number, readonly Placement[]>();

function placementsAt(out: Float64Array, at: number, count: number): readonly Placement[] {
  if (count === 1) {
    const code = out[at]!;
    let cached = singlePlacements.get(code);
    if (!cached) singlePlacements.set(code, (cached = Object.freeze([placementFromCode(code)])));
    return cached;
  }
  const list: Placement[] = [];
  for (let i = 0; i < count; i++) list.push(placementFromCode(out[at + i]!));
  return Object.freeze(list);
}

// Consecutive ops mostly give one shape: their tensors share one frozen shape array, one
// allocation less per op for the collector (a loop that keeps its outputs pays for each).
let lastShape: readonly number[] = Object.freeze([]);

function shapeAt(out: Float64Array, at: number, ndim: number): readonly number[] {
  const last = lastShape;
  if (last.length === ndim) {
    let d = 0;
    while (d < ndim && last[d] === out[at + d]) d++;
    if (d === ndim) return last;
  }
  const shape = new Array<number>(ndim);
  for (let d = 0; d < ndim; d++) shape[d] = out[at + d]!;
  return (lastShape = Object.freeze(shape));
}

// Reads the output described at out[at..] (id, dtype, ndim, shape..., nPlacements, placements...).
function tensorAt(out: Float64Array, at: number, mesh: DeviceMesh): Tensor {
  const ndim = out[at + 2]!;
  const shape = shapeAt(out, at + 3, ndim);
  const placements = placementsAt(out, at + 4 + ndim, out[at + 3 + ndim]!);
  return new Tensor(out[at]!, shape, engine().dtypeName(out[at + 1]!), mesh, placements);
}

/** Every output of the last recorded op, as Tensors on `mesh`. */
export function outputs(mesh: DeviceMesh): Tensor[] {
  const out = engine().out;
  const result: Tensor[] = [];
  let at = 2;
  for (let k = 0; k < out[1]!; k++) {
    result.push(tensorAt(out, at, mesh));
    const ndim = out[at + 2]!;
    at += 4 + ndim + out[at + 3 + ndim]!;
  }
  return result;
}

/** The single output of the last recorded op. */
export function output(mesh: DeviceMesh): Tensor {
  return tensorAt(engine().out, 2, mesh);
}

// Writes the input ids, then `attrs`, and records op `name`.
function recordInputs(name: OpName, inputs: readonly Tensor[], attrs: readonly number[]): void {
  const e = engine();
  const args = e.reserveArgs(inputs.length + attrs.length);
  for (let i = 0; i < inputs.length; i++) args[i] = inputs[i]!.id;
  for (let i = 0; i < attrs.length; i++) args[inputs.length + i] = attrs[i]!;
  e.record(e.opCode(name), inputs.length, attrs.length);
}

/**
 * Records op `name` on `inputs` with `attrs` (the op's layout, OpAttrs: a wrong count or order of
 * fixed attributes is a compile error); its output, on `mesh` (default: the first input's).
 */
export function recordOp<N extends OpName>(name: N, inputs: readonly Tensor[], attrs: OpAttrs[N], mesh = inputs[0]!.mesh): Tensor {
  recordInputs(name, inputs, attrs);
  return output(mesh);
}

/** Like recordOp, for ops with several outputs. */
export function recordOpOutputs<N extends OpName>(name: N, inputs: readonly Tensor[], attrs: OpAttrs[N]): Tensor[] {
  recordInputs(name, inputs, attrs);
  return outputs(inputs[0]!.mesh);
}

/** `x` when it is a Tensor; else INVALID_ARGUMENT naming `what`. */
export function checkTensor(what: string, x: unknown): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter(what, 'Tensor', x);
  return x;
}

/**
 * Records the one-tensor op `name` on `x` (refused as "`name` input" when not a Tensor), with
 * `attrs` where the op has any: the unary ops and activations.
 */
export function recordUnary<N extends OpName>(name: N, x: Tensor, ...attrs: OpAttrs[N] extends readonly [] ? [] : [OpAttrs[N]]): Tensor {
  return recordOp(name, [checkTensor(`${name} input`, x)], (attrs[0] ?? []) as OpAttrs[N]);
}

/** Writes `meshId, nPlacements, placements..., dtype` at args[0..]; returns the next index. */
export function writeCreationHeader(mesh: DeviceMesh, placements: readonly Placement[], dtype: DType): number {
  const e = engine();
  const args = e.reserveArgs(3 + placements.length);
  let i = 0;
  args[i++] = mesh.id;
  args[i++] = placements.length;
  for (const p of placements) args[i++] = p.code();
  args[i++] = e.dtypeCode(dtype);
  return i;
}

/** Writes `ndim, shape...` at args[at..]; returns the next index. */
export function writeShape(at: number, shape: readonly number[]): number {
  const args = engine().reserveArgs(at + 1 + shape.length);
  args[at++] = shape.length;
  for (const s of shape) args[at++] = s;
  return at;
}
