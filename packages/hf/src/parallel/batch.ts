// Model inputs on a mesh: the batch (dim 0) split over the mesh dim named 'dp', replicated on
// every other dim, so data parallelism needs nothing from the model code.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';

/** Placements of a batch-first input on `mesh`: Shard(0) on 'dp', Replicate elsewhere. */
export function batchPlacements(mesh: dt.DeviceMesh): dt.Placement[] {
  return mesh.shape.map((_, d) => (mesh.dimNames?.[d] === 'dp' ? dt.Shard(0) : dt.Replicate()));
}

/**
 * `value` as a [batch, length] tensor on `mesh`: a Tensor as it is (it must be on `mesh`),
 * nested arrays (a tokenizer's `inputIds`) as int64 with the batch split over 'dp'.
 */
export function batchInput(what: string, value: dt.Tensor | readonly (readonly number[])[], mesh: dt.DeviceMesh): dt.Tensor {
  if (value instanceof dt.Tensor) {
    if (!value.mesh.equals(mesh)) {
      throw new DTorchError(ErrorCode.MeshMismatch, `${what} is on ${value.mesh} but the model on ${mesh}; create it on the model's mesh`);
    }
    if (value.ndim !== 2) throw new DTorchError(ErrorCode.ShapeMismatch, `${what} must be [batch, length], got ${value.describe()}`);
    return value;
  }
  if (!Array.isArray(value) || value.length === 0 || !value.every((row) => Array.isArray(row) && row.length === value[0]!.length)) {
    throw invalidParameter(what, 'a Tensor or a non-empty array of equal-length arrays of token ids', value);
  }
  return dt.tensor(value as number[][], { dtype: 'int64', mesh, placements: batchPlacements(mesh) });
}

/**
 * Placements of a batch-first tensor of `batch` rows split over the mesh dims named in `dims`
 * (Shard(0) on each, in mesh order, while the rows divide evenly; Replicate elsewhere). A
 * denoiser's batch that stacks classifier-free guidance's branches [negative; positive] goes
 * over ['cfg', 'dp']: with a 'cfg' dim of size 2 each half of the mesh runs one branch, as
 * xDiT's CFG parallel; models take it as they take a batch split over 'dp'.
 */
export function batchPlacementsOver(mesh: dt.DeviceMesh, batch: number, dims: readonly string[]): dt.Placement[] {
  let pieces = 1;
  return mesh.shape.map((size, d) => {
    if (!dims.includes(mesh.dimNames?.[d] ?? '') || batch % (pieces * size) !== 0) return dt.Replicate();
    pieces *= size;
    return dt.Shard(0);
  });
}
