// Parallelism is chosen by the mesh's dim names ('tp', 'dp', 'cfg', 'ulysses', 'ring'): what
// splits over a dim must divide its size.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** An INVALID_MESH error when `count` (heads, say) cannot be split evenly over the mesh dim named `dimName` (none: nothing to check). */
export function checkDivides(mesh: dt.DeviceMesh, dimName: string, model: string, what: string, count: number): void {
  const d = mesh.dimNames?.indexOf(dimName) ?? -1;
  if (d < 0) return;
  const size = mesh.shape[d]!;
  if (count % size !== 0) {
    throw new DTorchError(ErrorCode.InvalidMesh, `${model}: ${what} ${count} cannot be split over the mesh dim '${dimName}' of size ${size}; use a ${dimName} size that divides ${count}`);
  }
}
