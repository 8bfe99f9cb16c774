// Features joined from parts split over 'tp': a colwise layer's output stays split on its last
// dim, and two such outputs cannot be concatenated piece by piece into one feature order (each
// device would hold columns of both). Flux's single blocks join the attention's output and the
// MLP's before proj_out; under tp the parts are gathered first and proj_out stays whole.
import * as dt from '@dtorch/api';

/** torch.cat(parts, dim), with the parts first made whole on every mesh dim where one is split along `dim`. */
export function catFeatures(parts: readonly dt.Tensor[], dim: number): dt.Tensor {
  const d = dim < 0 ? parts[0]!.ndim + dim : dim;
  const splitOn = new Set(parts.flatMap((p) => p.placements.flatMap((q, m) => (q.isShard(d) ? [m] : []))));
  if (splitOn.size === 0) return dt.cat(parts, dim);
  return dt.tidy(() => dt.cat(parts.map((p) => p.redistribute(p.placements.map((q, m) => (splitOn.has(m) ? dt.Replicate() : q)))), dim));
}
