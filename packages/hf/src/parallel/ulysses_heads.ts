// Ulysses by explicit head trading, for attention that joins token streams itself (SD3's joint
// attention over cat(image, text)): on a mesh with a dim named 'ulysses', the streams are split
// by tokens over it after their embeddings (every layer but attention acts token by token), and
// the attention trades each stream's token block for a block of heads (one all-to-all per q, k
// and v of each stream), joins the streams whole on its heads, attends, and trades back. Token
// counts need not divide the mesh dim (SD3's 333 text tokens): uneven splits follow torch.chunk
// sizes. Heads must divide. Only 'ulysses' (not 'ring'). The output is gathered with
// gatherSequence (sequence_parallel.ts), which also holds the plan-driven scheme (Flux: streams
// joined piece by piece, sdpa running Ulysses or ring itself; token counts must divide).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** The mesh dim named 'ulysses', or -1. */
export function ulyssesDim(mesh: dt.DeviceMesh): number {
  return mesh.dimNames?.indexOf('ulysses') ?? -1;
}

const withPlacement = (t: dt.Tensor, meshDim: number, p: dt.Placement) => t.redistribute(t.placements.map((q, d) => (d === meshDim ? p : q)));

/** Tokens [B, N, D] split by tokens over 'ulysses' (as they are on any other mesh). */
export function splitTokens(t: dt.Tensor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u < 0 || t.placements[u]!.isShard(1) ? t : withPlacement(t, u, dt.Shard(1));
}

/** [B, H, N, E] split by tokens (dim 2) over 'ulysses' to split by heads (dim 1); others as they are. */
export function tokensToHeads(t: dt.Tensor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && t.placements[u]!.isShard(2) ? withPlacement(t, u, dt.Shard(1)) : t;
}

/** The inverse of tokensToHeads for an attention output `t` whose input `like` was split by tokens. */
export function headsToTokens(t: dt.Tensor, like: dt.Tensor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && like.placements[u]!.isShard(2) ? withPlacement(t, u, dt.Shard(2)) : t;
}

/** A SHARD error when the heads cannot be split evenly over 'ulysses'. */
export function checkUlyssesDivides(mesh: dt.DeviceMesh, model: string, heads: number): void {
  const u = ulyssesDim(mesh);
  if (u >= 0 && heads % mesh.shape[u]! !== 0) {
    throw new DTorchError(ErrorCode.InvalidMesh, `${model}: num_attention_heads ${heads} cannot be split over the mesh dim 'ulysses' of size ${mesh.shape[u]}; use a ulysses size that divides ${heads}`);
  }
}
