// Tensor parallelism acts along the mesh dim named 'tp'; every other mesh dim (dp, ulysses,
// ring, ...) keeps whatever placement a tensor has there. A mesh without a 'tp' dim makes the
// parallel layers plain layers.
import * as dt from '@dtorch/api';

/** Index of the mesh dim named 'tp', or -1. */
export function tpDim(mesh: dt.DeviceMesh): number {
  return (mesh.dimNames ?? []).indexOf('tp');
}

/** Placements for a parameter: `placement` on the tp dim, Replicate on the others. */
export function onTpDim(mesh: dt.DeviceMesh, placement: dt.Placement): dt.Placement[] {
  const tp = tpDim(mesh);
  return mesh.shape.map((_, d) => (d === tp ? placement : dt.Replicate()));
}

/**
 * `x` with `placement` on the tp dim of its mesh and its other placements unchanged: `x`
 * itself when it already lies so (or there is no tp dim), else a redistributed copy.
 * Shard(-1) means the last dim of `x`.
 */
export function toTp(x: dt.Tensor, placement: dt.Placement): dt.Tensor {
  const tp = tpDim(x.mesh);
  if (tp < 0) return x;
  const target = placement.isShard() && placement.dim < 0 ? dt.Shard(placement.dim + x.ndim) : placement;
  if (x.placements[tp]!.equals(target)) return x;
  return x.redistribute(x.placements.map((p, d) => (d === tp ? target : p)));
}
