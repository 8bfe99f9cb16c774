// Sequence (context) parallel plans: which inputs of a model are split by tokens over the mesh
// dims named 'ulysses' and 'ring', as data beside the model (diffusers' _cp_plan), so the model
// code stays single-device code. Attention (dt.F.sdpa) sees q, k and v split by tokens on those
// dims and runs Ulysses or ring attention; everything else acts token by token.
//
// A joint sequence (Flux's text tokens, then image tokens) is joined piece by piece
// (dt.joinShards): on N sequence pieces, piece r of the joint sequence is piece r of the text
// then piece r of the image, so each device keeps its own tokens and no others. That is a
// permutation of the single-device order, the same for queries, keys, values and their rotary
// tables; attention does not depend on the order of its keys and gives each query its own row,
// so the parts split back out (dt.splitShards) are equal to a single device's. With one piece
// (any other mesh) joining is torch.cat. Token counts need not divide the pieces (uneven splits
// follow torch.chunk sizes) as long as each device's pieces add up to the joint sequence's
// torch.chunk piece (e.g. 333 text and 4,096 image tokens over 2, 4 or 8); joinShards says at
// the call when they do not.
//
// SD3 joins its streams inside attention, after trading tokens for heads over 'ulysses', and
// joins them piece by piece over 'ring' the same way (ulysses_heads.ts); both gather their
// output with gatherSequence.
import * as dt from '@dtorch/api';

/** The mesh dim names that split a sequence by tokens: 'ulysses' (heads traded for tokens) and 'ring' (keys and values passed round). */
export const sequenceParallelDimNames = ['ulysses', 'ring'] as const;

/** Input name to the dim split over 'ulysses' / 'ring' (and, for batch-first inputs, dim 0 over 'dp' and, where it divides, 'cfg'). */
export interface SequenceParallelPlan {
  /** Inputs split by tokens: name to the token dim. */
  readonly sequence: Readonly<Record<string, number>>;
  /** Batch-first inputs (split over 'dp'). */
  readonly batch: readonly string[];
}

const isSequenceDim = (name: string | undefined) => (sequenceParallelDimNames as readonly string[]).includes(name ?? '');

/** The placements of an input of `plan` on `mesh`: its token dim split on 'ulysses'/'ring', its batch (of `rows`) on 'dp', and on 'cfg' where it divides. */
export function inputPlacements(mesh: dt.DeviceMesh, sequenceDim: number | undefined, batchFirst: boolean, rows?: number): dt.Placement[] {
  return mesh.shape.map((size, d) => {
    const name = mesh.dimNames?.[d];
    if (sequenceDim !== undefined && isSequenceDim(name)) return dt.Shard(sequenceDim);
    if (batchFirst && name === 'dp') return dt.Shard(0);
    // the two branches of classifier-free guidance batched [negative; positive] (CFG parallel);
    // a batch that does not split (no guidance batch) stays whole there, the work repeated
    if (batchFirst && name === 'cfg' && rows !== undefined && rows % size === 0) return dt.Shard(0);
    return dt.Replicate();
  });
}

/** How many pieces the mesh's 'ulysses'/'ring' dims cut `dim` of `t` into (1 when it is not split on them). */
export function sequencePieces(t: dt.Tensor, dim: number): number {
  const names = t.mesh.dimNames ?? [];
  return t.placements.reduce((n, p, d) => (isSequenceDim(names[d]) && p.isShard(dim) ? n * t.mesh.shape[d]! : n), 1);
}

/**
 * The inputs of `plan` placed as it says on `mesh` (the others as given). Token counts need not
 * divide the sequence pieces; joinSequence checks that its parts join.
 */
export function placeInputs<T extends Record<string, dt.Tensor | undefined>>(plan: SequenceParallelPlan, mesh: dt.DeviceMesh, inputs: T): T {
  const placed: Record<string, dt.Tensor | undefined> = { ...inputs };
  for (const [name, t] of Object.entries(inputs)) {
    if (!t) continue;
    const sequenceDim = plan.sequence[name];
    const batchFirst = plan.batch.includes(name);
    if (sequenceDim === undefined && !batchFirst) continue;
    placed[name] = t.redistribute(inputPlacements(mesh, sequenceDim, batchFirst, t.shape[0]));
  }
  return placed as T;
}

/** `parts` joined along `dim` piece by piece (dt.joinShards; torch.cat on one piece); the parts must be split alike. */
export function joinSequence(parts: readonly dt.Tensor[], dim: number): dt.Tensor {
  return dt.joinShards(parts, dim);
}

/** The inverse of joinSequence: `t` split along `dim` into parts of `sizes` (their totals, as on one device). */
export function splitSequence(t: dt.Tensor, sizes: readonly number[], dim: number): dt.Tensor[] {
  return dt.splitShards(t, sizes, dim);
}

/** `t` whole on the 'ulysses' / 'ring' dims (other placements kept): a model's output. */
export function gatherSequence(t: dt.Tensor): dt.Tensor {
  const names = t.mesh.dimNames ?? [];
  if (!t.placements.some((p, d) => isSequenceDim(names[d]) && p.isShard())) return t;
  return t.redistribute(t.placements.map((p, d) => (isSequenceDim(names[d]) ? dt.Replicate() : p)));
}
