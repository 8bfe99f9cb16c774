// Moving a tensor between placements and meshes, and looking at its pieces.
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { DeviceMesh } from '../device_mesh.js';
import { normalizePlacements, type Placement } from '../placement.js';
import { output, recordOp } from '../record.js';
import { Tensor } from '../tensor.js';

/**
 * The same tensor with new placements, on its mesh or another one. Per mesh dim: S->R
 * all-gather, P->R all-reduce, P->S reduce-scatter, S(i)->S(j) all-to-all, R->S a local slice,
 * R->P the value at coordinate 0 and zeros elsewhere (Partial(sum)). Across meshes of one shape:
 * each rank's piece moves to the target rank of its index (nothing gathered), then takes the
 * placements asked for there; across others: gathered on the source, moved, then sliced on the target.
 * @see {@link Tensor.redistribute}
 */
export function redistribute(
  x: Tensor,
  meshOrPlacements: DeviceMesh | readonly Placement[],
  placements?: readonly Placement[],
): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter('redistribute input', 'Tensor', x);
  const mesh = meshOrPlacements instanceof DeviceMesh ? meshOrPlacements : x.mesh;
  const target = meshOrPlacements instanceof DeviceMesh ? placements : meshOrPlacements;
  const normalized = normalizePlacements(target, mesh.ndim, x.ndim, 'redistribute');
  engine().redistribute(x.id, mesh.id, normalized.map((p) => p.code()));
  return output(mesh);
}

/**
 * The steps `x.redistribute(placements)` takes on its mesh, one line each, e.g.
 * "reduce-scatter P(sum)->S(1) on mesh dim 0": what moves, without running anything.
 */
export function explainRedistribute(x: Tensor, placements: readonly Placement[]): string[] {
  if (!(x instanceof Tensor)) throw invalidParameter('explainRedistribute input', 'Tensor', x);
  const normalized = normalizePlacements(placements, x.mesh.ndim, x.ndim, 'explainRedistribute');
  return engine().planRedistribute(x.id, normalized.map((p) => p.code()));
}

const localMeshes = new Map<string, DeviceMesh>();

/** The 1-device mesh of `rank`'s device (one per device, reused). */
function meshOfRank(mesh: DeviceMesh, rank: number): DeviceMesh {
  const device = mesh.devices[rank]!;
  const key = `${mesh.deviceType}:${device}`;
  let found = localMeshes.get(key);
  if (!found) localMeshes.set(key, (found = new DeviceMesh(mesh.deviceType, [device])));
  return found;
}

function checkRank(x: Tensor, rank: number, fn: string): number {
  if (!(x instanceof Tensor)) throw invalidParameter(`${fn} input`, 'Tensor', x);
  checkInteger(`${fn} rank`, rank, 0);
  if (rank >= x.mesh.size) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${fn}: rank ${rank} is not on ${x.mesh} (ranks 0..${x.mesh.size - 1})`);
  }
  return rank;
}

/**
 * Rank `rank`'s piece as a tensor of its own, on a 1-device mesh of that rank's device.
 * @see {@link Tensor.toLocal}
 */
export function toLocal(x: Tensor, rank: number): Tensor {
  checkRank(x, rank, 'toLocal');
  const local = meshOfRank(x.mesh, rank);
  return recordOp('to_local', [x], [rank, local.id], local);
}

/**
 * Shape of rank `rank`'s piece (torch.chunk sizes; may be empty).
 * @see {@link Tensor.localShape}
 */
export function localShape(x: Tensor, rank: number): number[] {
  checkRank(x, rank, 'localShape');
  return engine().layout(x.id)[rank]!.shape;
}

/**
 * The shape of every rank's piece, in rank order (see {@link localShape}).
 * @see {@link Tensor.localShapes}
 */
export function localShapes(x: Tensor): number[][] {
  if (!(x instanceof Tensor)) throw invalidParameter('localShapes input', 'Tensor', x);
  return engine().layout(x.id).map((p) => p.shape);
}

/** A text table of which rank holds which index range of each dim, as DTensor's visualize_sharding. */
export function visualizeSharding(x: Tensor): string {
  if (!(x instanceof Tensor)) throw invalidParameter('visualizeSharding input', 'Tensor', x);
  const pieces = engine().layout(x.id);
  const partial = x.placements.filter((p) => p.isPartial()).map(String);
  const header = ['rank', 'device', ...x.shape.map((_, d) => `dim ${d}`), ...(partial.length ? ['holds'] : [])];
  const rows = pieces.map((p, rank) => [
    String(rank),
    p.device,
    ...p.shape.map((size, d) => `[${p.offset[d]}, ${p.offset[d]! + size})`),
    ...(partial.length ? [`partial ${partial.join(' ')}`] : []),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) => cells.map((cell, c) => cell.padEnd(widths[c]!)).join('  ').trimEnd();
  return [`${x.describe()} on ${x.mesh}`, line(header), ...rows.map(line)].join('\n');
}
