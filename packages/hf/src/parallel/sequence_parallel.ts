// Sequence (context) parallel plans: which inputs of a model are split by tokens over the mesh
// dims named 'ulysses' and 'ring', as data beside the model (diffusers' _cp_plan), so the model
// code stays single-device code. Attention (dt.F.sdpa) sees q, k and v split by tokens on those
// dims and runs Ulysses or ring attention; everything else acts token by token.
//
// A joint sequence (Flux's text tokens, then image tokens) is joined piece by piece: on N
// sequence pieces, piece r of the joint sequence is piece r of the text then piece r of the
// image, so each device keeps its own tokens and no others. That is a permutation of the single-device order,
// the same for queries, keys, values and their rotary tables; attention does not depend on the
// order of its keys and gives each query its own row, so the parts split back out are equal to
// a single device's. With one piece (any other mesh) joining is torch.cat.
//
// SD3 joins its streams inside attention instead, trading tokens for heads over 'ulysses'
// (ulysses_heads.ts: uneven token counts, no ring); both gather their output with gatherSequence.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

export const sequenceParallelDimNames = ['ulysses', 'ring'] as const;

/** Input name to the dim split over 'ulysses' / 'ring' (and, for batch-first inputs, dim 0 over 'dp'). */
export interface SequenceParallelPlan {
  /** Inputs split by tokens: name to the token dim. */
  readonly sequence: Readonly<Record<string, number>>;
  /** Batch-first inputs (split over 'dp'). */
  readonly batch: readonly string[];
}

const isSequenceDim = (name: string | undefined) => (sequenceParallelDimNames as readonly string[]).includes(name ?? '');

/** The placements of an input of `plan` on `mesh`: its token dim split on 'ulysses'/'ring', its batch on 'dp'. */
export function inputPlacements(mesh: dt.DeviceMesh, sequenceDim: number | undefined, batchFirst: boolean): dt.Placement[] {
  return mesh.shape.map((_, d) => {
    const name = mesh.dimNames?.[d];
    if (sequenceDim !== undefined && isSequenceDim(name)) return dt.Shard(sequenceDim);
    if (batchFirst && name === 'dp') return dt.Shard(0);
    return dt.Replicate();
  });
}

/** How many pieces the mesh's 'ulysses'/'ring' dims cut `dim` of `t` into (1 when it is not split on them). */
export function sequencePieces(t: dt.Tensor, dim: number): number {
  const names = t.mesh.dimNames ?? [];
  return t.placements.reduce((n, p, d) => (isSequenceDim(names[d]) && p.isShard(dim) ? n * t.mesh.shape[d]! : n), 1);
}

/**
 * The inputs of `plan` placed as it says on `mesh` (the others as given). A token count that does
 * not split evenly over the sequence dims is a SHAPE_MISMATCH error naming `what`.
 */
export function placeInputs<T extends Record<string, dt.Tensor | undefined>>(what: string, plan: SequenceParallelPlan, mesh: dt.DeviceMesh, inputs: T): T {
  const pieces = mesh.shape.reduce((n, size, d) => (isSequenceDim(mesh.dimNames?.[d]) ? n * size : n), 1);
  const placed: Record<string, dt.Tensor | undefined> = { ...inputs };
  for (const [name, t] of Object.entries(inputs)) {
    if (!t) continue;
    const sequenceDim = plan.sequence[name];
    const batchFirst = plan.batch.includes(name);
    if (sequenceDim === undefined && !batchFirst) continue;
    if (sequenceDim !== undefined && t.shape[sequenceDim]! % pieces !== 0) {
      throw new DTorchError(
        ErrorCode.ShapeMismatch,
        `${what}: ${name} has ${t.shape[sequenceDim]} tokens, which do not split evenly over the mesh's sequence-parallel dims (${pieces} pieces); use a token count divisible by ${pieces}`,
      );
    }
    placed[name] = t.redistribute(inputPlacements(mesh, sequenceDim, batchFirst));
  }
  return placed as T;
}

// The rows a joined dim is cut into: one per sequence piece, so each device's piece is one row.
const rowsOf = (t: dt.Tensor, dim: number) => sequencePieces(t, dim);

// t with `dim` cut into [rows, length / rows]
const byRows = (t: dt.Tensor, dim: number, rows: number) => t.reshape([...t.shape.slice(0, dim), rows, t.shape[dim]! / rows, ...t.shape.slice(dim + 1)]);
const merged = (t: dt.Tensor, dim: number) => t.reshape([...t.shape.slice(0, dim), -1, ...t.shape.slice(dim + 2)]);

/** `parts` joined along `dim` piece by piece (torch.cat on one piece); the parts must be split alike. */
export function joinSequence(parts: readonly dt.Tensor[], dim: number): dt.Tensor {
  if (sequencePieces(parts[0]!, dim) === 1) return dt.cat(parts, dim);
  const rows = rowsOf(parts[0]!, dim);
  return dt.tidy(() => merged(dt.cat(parts.map((p) => byRows(p, dim, rows)), dim + 1), dim));
}

/** The inverse of joinSequence: `t` split along `dim` into parts of `sizes` (their totals, as on one device). */
export function splitSequence(t: dt.Tensor, sizes: readonly number[], dim: number): dt.Tensor[] {
  if (sequencePieces(t, dim) === 1) return t.split(sizes, dim);
  const rows = rowsOf(t, dim);
  return dt.tidy(() =>
    byRows(t, dim, rows)
      .split(sizes.map((s) => s / rows), dim + 1)
      .map((p) => merged(p, dim)),
  );
}

/** `t` whole on the 'ulysses' / 'ring' dims (other placements kept): a model's output. */
export function gatherSequence(t: dt.Tensor): dt.Tensor {
  const names = t.mesh.dimNames ?? [];
  if (!t.placements.some((p, d) => isSequenceDim(names[d]) && p.isShard())) return t;
  return t.redistribute(t.placements.map((p, d) => (isSequenceDim(names[d]) ? dt.Replicate() : p)));
}
