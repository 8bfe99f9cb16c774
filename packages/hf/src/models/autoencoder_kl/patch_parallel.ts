// Patch parallel (xDiT's DistVAE): the VAE's image split by rows over the devices of some mesh
// dims. The ranks along those dims form a row group; one group runs per batch piece ('dp'), and
// mesh dims that neither split rows nor the batch do not repeat the work (their first
// coordinate runs it, the result is copied to the others). Each group's pieces run alone
// (row_layers.ts); their outputs join into one tensor on the model's mesh, placed as the
// single-device path places it (the batch split as the input's, replicated elsewhere).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type * as nn from '@dtorch/nn';
import { LocalWeights } from './row_layers.js';
import { RowSplit, chunkSizes } from './row_split.js';

/** How the image's rows go to a group's devices: 'decode' as torch.chunk; 'encode' in whole latent rows, so that every downsampling sees even pieces. */
export type RowSplitKind = { kind: 'decode' } | { kind: 'encode'; downsamplings: number };

/**
 * The mesh dims (indices) that `choice` names: true every dim of `mesh`, false none, else the
 * dims of those names; a name the mesh lacks is an INVALID_MESH error naming the mesh's dims.
 */
export function patchParallelDims(what: string, mesh: dt.DeviceMesh, choice: unknown): number[] {
  if (choice === true) return mesh.shape.map((_, d) => d);
  if (choice === false) return [];
  const list = typeof choice === 'string' ? [choice] : choice;
  if (!Array.isArray(list) || !list.every((d) => typeof d === 'string')) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what} must be true, false, a mesh dim name or a list of them, got ${JSON.stringify(choice)}`);
  }
  const names = mesh.dimNames ?? [];
  return [...new Set(list as string[])].map((d) => {
    if (!names.includes(d)) {
      const have = names.length ? `its dims are ${names.map((n) => `'${n}'`).join(', ')}` : 'it has no dim names';
      throw new DTorchError(ErrorCode.InvalidMesh, `${what}: '${d}' is not a dim of the VAE's mesh ${mesh} (${have}); name one of its dims, or pass true for all of them`);
    }
    return names.indexOf(d);
  });
}

/** The rows of each piece of an image of `rows` rows over `devices` devices (no piece empty; fewer pieces than devices when the rows are few). */
export function splitRows(rows: number, devices: number, split: RowSplitKind): number[] {
  if (split.kind === 'decode') return chunkSizes(rows, devices);
  // whole latent rows each, the last piece taking the rest (rows not a multiple of 2^levels)
  const unit = 2 ** split.downsamplings;
  const latentRows = Math.floor(rows / unit);
  if (latentRows <= 1) return [rows];
  const sizes = chunkSizes(latentRows, devices).map((n) => n * unit);
  sizes[sizes.length - 1]! += rows - latentRows * unit;
  return sizes;
}

/** The ranks of each row group in rank order, one group per batch piece, and the input's placements that make every rank hold its batch piece whole. */
function rowGroups(x: dt.Tensor, rowDims: readonly number[]): { groups: number[][]; placements: dt.Placement[] } {
  const mesh = x.mesh;
  // the batch stays split where the input splits it; everything else is whole on every rank
  const placements = x.placements.map((p, d) => (!rowDims.includes(d) && p.isShard(0) ? p : dt.Replicate()));
  const groups = new Map<string, number[]>();
  for (let rank = 0; rank < mesh.size; rank++) {
    const coords = mesh.coordinates(rank);
    // a dim that splits neither rows nor the batch: only its first coordinate runs
    if (coords.some((c, d) => c !== 0 && !rowDims.includes(d) && !placements[d]!.isShard(0))) continue;
    const key = coords.filter((_, d) => placements[d]!.isShard(0)).join();
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key)!.push(rank);
  }
  return { groups: [...groups.values()], placements };
}

/**
 * `run` over x [batch, channels, rows, width] split by rows over the mesh dims `dims` (indices;
 * those the batch is split over left out), its output joined on x's mesh, the batch placed as
 * x's. With no dim left, `run` is not called and undefined comes back: the caller runs unsplit.
 */
export function rowSplitForward(x: dt.Tensor, dims: readonly number[], module: nn.Module, split: RowSplitKind, run: (pieces: RowSplit, weights: LocalWeights) => RowSplit): dt.Tensor | undefined {
  const mesh = x.mesh;
  const rowDims = dims.filter((d) => mesh.shape[d]! > 1 && !x.placements[d]!.isShard(0));
  if (rowDims.length === 0) return undefined;
  const { groups, placements } = rowGroups(x, rowDims);
  const whole = placements.every((p, d) => p.equals(x.placements[d]!)) ? x : x.redistribute(placements);
  const outputs: dt.Tensor[] = [];
  try {
    for (const ranks of groups) {
      if (whole.localShape(ranks[0]!)[0] === 0) continue; // a batch piece with no images
      outputs.push(runGroup(whole, ranks, module, split, run));
    }
    const joined = outputs.length === 1 ? outputs.pop()! : dt.cat(outputs, 0);
    if (placements.every((p) => p.isReplicate())) return joined;
    const placed = joined.redistribute(placements);
    joined.dispose();
    return placed;
  } finally {
    dt.dispose(outputs);
    if (whole !== x) whole.dispose();
  }
}

// one row group: its batch piece cut into rows on its ranks, run, the output pieces replicated on the mesh and joined
function runGroup(x: dt.Tensor, ranks: readonly number[], module: nn.Module, split: RowSplitKind, run: (pieces: RowSplit, weights: LocalWeights) => RowSplit): dt.Tensor {
  const sizes = splitRows(x.shape[2]!, ranks.length, split);
  const starts = sizes.map((_, i) => sizes.slice(0, i).reduce((a, b) => a + b, 0));
  const input = new RowSplit(sizes.map((n, i) => dt.tidy(() => x.toLocal(ranks[i]!).narrow(2, starts[i]!, n).clone())));
  const weights = new LocalWeights(module, ranks.slice(0, sizes.length));
  let output: RowSplit | undefined;
  try {
    output = run(input, weights);
    const pieces = output.pieces;
    return dt.tidy(() => dt.cat(pieces.map((p) => p.redistribute(x.mesh, x.mesh.shape.map(() => dt.Replicate()))), 2));
  } finally {
    output?.dispose();
    weights.dispose();
    input.dispose();
  }
}
