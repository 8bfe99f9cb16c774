// Where a model's tokens lie over the mesh dims named 'ulysses' and 'ring' (sequence, or
// context, parallelism): split by tokens there from the embeddings to the output, so that every
// layer but attention acts on its own tokens, and attention (dt.F.sdpa) sees q, k and v split by
// tokens and runs Ulysses or ring attention. The placements a context-parallel plan gives
// (context_parallel.ts) come from here; how split token streams join is joint_attention.ts's.
import * as dt from '@dtorch/api';
import { pieceByPieceJoin } from './joint_attention.js';

/** The mesh dim names that split a sequence by tokens: 'ulysses' (heads traded for tokens) and 'ring' (keys and values passed round). */
export const sequenceParallelDimNames = ['ulysses', 'ring'] as const;

/** Whether the mesh dim named `name` splits sequences by tokens ('ulysses' or 'ring'). */
export const isSequenceDim = (name: string | undefined): boolean => (sequenceParallelDimNames as readonly string[]).includes(name ?? '');

/**
 * The placements of a model input on `mesh`: its token dim `sequenceDim` split on
 * 'ulysses'/'ring', its batch (of `rows`, when `batchFirst`) on 'dp' and on 'cfg' where it
 * divides, replicated on every other dim.
 */
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

/** `t` split along `dim` (its tokens) on the 'ulysses' / 'ring' dims, its other placements kept: `t` itself when it lies so already. */
export function shardTokens(t: dt.Tensor, dim: number): dt.Tensor {
  const names = t.mesh.dimNames ?? [];
  const placements = t.placements.map((p, d) => (isSequenceDim(names[d]) ? dt.Shard(dim) : p));
  return placements.every((p, d) => p.equals(t.placements[d]!)) ? t : t.redistribute(placements);
}

/** `t` whole on the 'ulysses' / 'ring' dims (other placements kept): a model's output. */
export function gatherSequence(t: dt.Tensor): dt.Tensor {
  const names = t.mesh.dimNames ?? [];
  if (!t.placements.some((p, d) => isSequenceDim(names[d]) && p.isShard())) return t;
  return t.redistribute(t.placements.map((p, d) => (isSequenceDim(names[d]) ? dt.Replicate() : p)));
}

/** How many pieces the mesh's 'ulysses'/'ring' dims cut `dim` of `t` into (1 when it is not split on them). */
export function sequencePieces(t: dt.Tensor, dim: number): number {
  const names = t.mesh.dimNames ?? [];
  return t.placements.reduce((n, p, d) => (isSequenceDim(names[d]) && p.isShard(dim) ? n * t.mesh.shape[d]! : n), 1);
}

/** `parts` joined along `dim` piece by piece (dt.joinShards; torch.cat on one piece); the parts must be split alike. */
export function joinSequence(parts: readonly dt.Tensor[], dim: number): dt.Tensor {
  return pieceByPieceJoin.join(parts, dim);
}

/** The inverse of joinSequence: `t` split along `dim` into parts of `sizes` (their totals, as on one device). */
export function splitSequence(t: dt.Tensor, sizes: readonly number[], dim: number): dt.Tensor[] {
  return pieceByPieceJoin.split(t, sizes, dim);
}

/**
 * Input name to the dim split over 'ulysses' / 'ring' (and, for batch-first inputs, dim 0 over
 * 'dp' and, where it divides, 'cfg'): a model's inputs by name, placed with placeInputs.
 * @deprecated Models declare a context-parallel plan (ContextParallelPlan: by module, applied by parallelize);
 * this older form by input name is kept for callers that place inputs themselves.
 */
export interface SequenceParallelPlan {
  /** Inputs split by tokens: name to the token dim. */
  readonly sequence: Readonly<Record<string, number>>;
  /** Batch-first inputs (split over 'dp'). */
  readonly batch: readonly string[];
}

/**
 * The inputs of `plan` placed as it says on `mesh` (the others as given). Token counts need not
 * divide the sequence pieces; the join checks that its parts join.
 * @deprecated See {@link SequenceParallelPlan}.
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
