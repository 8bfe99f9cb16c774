// Ulysses by explicit head trading, and ring attention over joined pieces, for attention that
// joins token streams itself (SD3's joint attention over image then text tokens). On a mesh
// with dims named 'ulysses' and/or 'ring', the streams are split by tokens over them after their
// embeddings (every layer but attention acts token by token). The attention trades each
// stream's 'ulysses' token block for a block of heads (one all-to-all per q, k and v of each
// stream), so that the streams are whole over 'ulysses'; split by tokens over 'ring' still,
// they are joined piece by piece (dt.joinShards: each device keeps its own tokens, piece r of
// the joint sequence is image piece r then text piece r) and sdpa runs ring attention over
// them; the output is split back (dt.splitShards) and traded back. Joining piece by piece
// permutes the keys, which non-causal attention does not see, and gives each query its own row.
// Token counts need not divide the mesh dims (SD3's 333 text tokens): uneven splits follow
// torch.chunk sizes, and the join needs each device's pieces to add up to the joint sequence's
// torch.chunk piece (333 and 4,096 over 2, 4 or 8 ring pieces do; joinShards says when not).
// Heads must divide 'ulysses'. The output is gathered with gatherSequence
// (sequence_parallel.ts), which also holds the plan-driven scheme (Flux: the streams joined
// piece by piece before attention, sdpa running Ulysses and/or ring itself).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { sequenceParallelDimNames } from './sequence_parallel.js';

/** The mesh dim named 'ulysses', or -1. */
export function ulyssesDim(mesh: dt.DeviceMesh): number {
  return mesh.dimNames?.indexOf('ulysses') ?? -1;
}

const withPlacement = (t: dt.Tensor, meshDim: number, p: dt.Placement) => t.redistribute(t.placements.map((q, d) => (d === meshDim ? p : q)));

const isSequenceDim = (name: string | undefined) => (sequenceParallelDimNames as readonly string[]).includes(name ?? '');

/** Tokens [B, N, D] split by tokens over 'ulysses' and 'ring' (as they are on any other mesh). */
export function splitTokens(t: dt.Tensor): dt.Tensor {
  const names = t.mesh.dimNames ?? [];
  const placements = t.placements.map((p, d) => (isSequenceDim(names[d]) ? dt.Shard(1) : p));
  return placements.every((p, d) => p.equals(t.placements[d]!)) ? t : t.redistribute(placements);
}

/** Which dims of a per-head tensor hold the tokens and the heads: [B, H, N, E] by default, or token-major [B, N, H, E]. */
export interface HeadLayout {
  /** 2 in [B, H, N, E], 1 in [B, N, H, E]. */
  tokenDim: number;
  /** 1 in [B, H, N, E], 2 in [B, N, H, E]. */
  headDim: number;
}
const headMajor: HeadLayout = { tokenDim: 2, headDim: 1 };

/** Per-head `t` split by tokens over 'ulysses' to split by heads; others as they are. */
export function tokensToHeads(t: dt.Tensor, { tokenDim, headDim }: HeadLayout = headMajor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && t.placements[u]!.isShard(tokenDim) ? withPlacement(t, u, dt.Shard(headDim)) : t;
}

/** The inverse of tokensToHeads for an attention output `t` whose input `like` was split by tokens. */
export function headsToTokens(t: dt.Tensor, like: dt.Tensor, { tokenDim }: HeadLayout = headMajor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && like.placements[u]!.isShard(tokenDim) ? withPlacement(t, u, dt.Shard(tokenDim)) : t;
}

/** A SHARD error when the heads cannot be split evenly over 'ulysses'. */
export function checkUlyssesDivides(mesh: dt.DeviceMesh, model: string, heads: number): void {
  const u = ulyssesDim(mesh);
  if (u >= 0 && heads % mesh.shape[u]! !== 0) {
    throw new DTorchError(ErrorCode.InvalidMesh, `${model}: num_attention_heads ${heads} cannot be split over the mesh dim 'ulysses' of size ${mesh.shape[u]}; use a ulysses size that divides ${heads}`);
  }
}
