// The joint-attention hook of a context-parallel plan: how a model joins its token streams
// (text and image) into one sequence for attention, and splits the output back. A model's
// attention calls its hook and holds no parallel code; the plan chooses the hook.
//
// pieceByPieceJoin (Flux, and every model by default): on N sequence pieces (tokens split over
// 'ulysses' / 'ring'), piece r of the joint sequence is piece r of each stream in turn
// (dt.joinShards), so each device keeps its own tokens and no others. That is a permutation of
// the single-device order, the same for queries, keys, values and their rotary tables;
// attention does not depend on the order of its keys and gives each query its own row, so the
// parts split back out (dt.splitShards) equal a single device's. With one piece (any other mesh)
// joining is torch.cat. sdpa then runs Ulysses and/or ring attention itself. Token counts need
// not divide the pieces (uneven splits follow torch.chunk sizes) as long as each device's pieces
// add up to the joint sequence's torch.chunk piece (333 text and 4,096 image tokens over 2, 4 or
// 8 do); joinShards says at the call when they do not.
//
// ulyssesHeadsJoin (SD3): each stream's per-head q, k and v first trade their 'ulysses' token
// block for a block of heads (one all-to-all each), so the streams are whole over 'ulysses' and
// only their 'ring' pieces join piece by piece; the output is split back and traded back. Heads
// must divide 'ulysses' (its headsOver).
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';

/** How attention over several token streams joins them into one sequence and splits its output back. */
export interface JointAttention {
  /** The mesh dim this hook splits heads over (the head count must divide its size), if any. */
  readonly headsOver?: string;
  /** Token streams (their tokens on `dim`, split alike) joined along `dim` into one sequence. */
  join(streams: readonly dt.Tensor[], dim: number): dt.Tensor;
  /**
   * Each stream's per-head q, k or v, token-major [B, N_i, heads, headDim], joined as attention
   * reads them: token-major [B, ΣN, heads, headDim], or with `headMajor` [B, heads, ΣN, headDim]
   * (each head's rows together).
   */
  joinHeads(streams: readonly dt.Tensor[], headMajor?: boolean): dt.Tensor;
  /** The inverse of join and of joinHeads' token-major form: `joined` split along `dim` into streams of `lengths` tokens (as on one device), each placed as its stream was. */
  split(joined: dt.Tensor, lengths: readonly number[], dim: number): dt.Tensor[];
}

// per-head streams made ready by `prepare` (in stream order, each prepared then laid out before
// the next), joined token-major along dim 1 or head-major along dim 2
function joinPerHead(streams: readonly dt.Tensor[], headMajor: boolean, prepare: (t: dt.Tensor) => dt.Tensor): dt.Tensor {
  const ready = streams.map((t) => (headMajor ? prepare(t).transpose(1, 2) : prepare(t)));
  return dt.joinShards(ready, headMajor ? 2 : 1);
}

/** Streams joined piece by piece (dt.joinShards: each device keeps its own tokens; torch.cat when whole), sdpa running Ulysses or ring attention over them: Flux's, and every model's by default. */
export const pieceByPieceJoin: JointAttention = {
  join: (streams, dim) => dt.joinShards(streams, dim),
  joinHeads: (streams, headMajor = false) => joinPerHead(streams, headMajor, (t) => t),
  split: (joined, lengths, dim) => dt.splitShards(joined, lengths, dim),
};

const ulyssesDim = (mesh: dt.DeviceMesh) => mesh.dimNames?.indexOf('ulysses') ?? -1;
const withPlacement = (t: dt.Tensor, meshDim: number, p: dt.Placement) => t.redistribute(t.placements.map((q, d) => (d === meshDim ? p : q)));

// a token-major per-head tensor [B, N, heads, headDim] split by tokens over 'ulysses' to split by heads
function tokensToHeads(t: dt.Tensor): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && t.placements[u]!.isShard(1) ? withPlacement(t, u, dt.Shard(2)) : t;
}

// a part split over 'ulysses' by anything but its tokens (`dim`: heads traded in) back to its tokens
function backToTokens(t: dt.Tensor, dim: number): dt.Tensor {
  const u = ulyssesDim(t.mesh);
  return u >= 0 && t.placements[u]!.isShard() && !t.placements[u]!.isShard(dim) ? withPlacement(t, u, dt.Shard(dim)) : t;
}

/** Each stream's tokens traded for heads over 'ulysses' before the streams join piece by piece (over 'ring'), and traded back after the split: SD3's. */
export const ulyssesHeadsJoin: JointAttention = {
  headsOver: 'ulysses',
  join: pieceByPieceJoin.join,
  joinHeads: (streams, headMajor = false) => joinPerHead(streams, headMajor, tokensToHeads),
  split: (joined, lengths, dim) => dt.splitShards(joined, lengths, dim).map((t) => backToTokens(t, dim)),
};

/** A module that joins token streams through a JointAttention hook (the plan's; pieceByPieceJoin by default). */
export interface HasJointAttention {
  /** How the module joins its token streams and splits them back. */
  jointAttention: JointAttention;
}

/** Whether `m` joins token streams through a JointAttention hook. */
export function hasJointAttention(m: nn.Module): m is nn.Module & HasJointAttention {
  const hook = (m as Partial<HasJointAttention>).jointAttention;
  return typeof hook?.join === 'function' && typeof hook.joinHeads === 'function' && typeof hook.split === 'function';
}
