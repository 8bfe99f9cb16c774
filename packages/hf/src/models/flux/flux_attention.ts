// FluxAttention with diffusers' FluxAttnProcessor: q/k/v projections with per-head RMS norms;
// in the double-stream blocks the text tokens' own projections (add_*_proj, norm_added_*) join
// the sequence first; rotary embeddings on q and k over the joint sequence; sdpa; the output
// split back into image (to_out.0) and text (to_add_out) parts. The single-stream blocks use it
// without the added projections and without an output projection (pre_only). The streams join
// and split back through the context-parallel plan's joint-attention hook.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { pieceByPieceJoin, type HasJointAttention, type JointAttention } from '../../parallel/joint_attention.js';
import { PackedProjections, type HasPackedProjections } from '../attention/packed_projections.js';

/** The rotary tables [cos, sin], each float32 [S, headDim], as rotaryFromIds gives them. */
export type RotaryTables = readonly [dt.Tensor, dt.Tensor];

/**
 * Where FluxAttention.forward takes the image stream's q, k and v from: 'hidden' projects
 * `hidden`; 'joined' projects the LoRA join [x | A x | …] a single block's proj_mlp shares
 * (imageLoraA()); three tensors are the projections already made (a single block's FP8 q/k/v
 * packed with its proj_mlp: packImageWith()).
 */
export type ImageProjections = 'hidden' | 'joined' | readonly [dt.Tensor, dt.Tensor, dt.Tensor];

/** The options of FluxAttention (diffusers' constructor arguments, camelCase). */
export interface FluxAttentionOptions extends ModelOptions {
  /** Attention heads. */
  heads: number;
  /** Each head's width. */
  dimHead: number;
  /** Width of the text stream's own projections (double-stream blocks), none for single-stream. */
  addedKvProjDim?: number;
  /** No output projection (single-stream blocks). */
  preOnly?: boolean;
  /** The per-head RMS norms' epsilon (Flux: 1e-6). */
  eps: number;
}

/** diffusers' FluxAttention with FluxAttnProcessor: per-head RMS-normed q and k, rotary embeddings, sdpa over the joint sequence. */
export class FluxAttention extends nn.Module implements HasPackedProjections, HasJointAttention {
  /** Attention heads (all of them; each device holds heads / tp under 'tp'). */
  readonly heads: number;
  /** Each head's width. */
  readonly headDim: number;
  /** RMS norm of each query head. */
  norm_q: nn.RMSNorm;
  /** RMS norm of each key head. */
  norm_k: nn.RMSNorm;
  /** queryDim to heads x headDim. */
  to_q: nn.Linear;
  /** queryDim to heads x headDim. */
  to_k: nn.Linear;
  /** queryDim to heads x headDim. */
  to_v: nn.Linear;
  /** to_out.0, heads x headDim to queryDim (to_out.1 a dropout); undefined with preOnly. */
  to_out: nn.ModuleList | undefined;
  /** RMS norm of each text query head (double-stream blocks only). */
  norm_added_q: nn.RMSNorm | undefined;
  /** RMS norm of each text key head (double-stream blocks only). */
  norm_added_k: nn.RMSNorm | undefined;
  /** The text tokens' query projection (double-stream blocks only). */
  add_q_proj: nn.Linear | undefined;
  /** The text tokens' key projection (double-stream blocks only). */
  add_k_proj: nn.Linear | undefined;
  /** The text tokens' value projection (double-stream blocks only). */
  add_v_proj: nn.Linear | undefined;
  /** The text tokens' output projection (double-stream blocks only). */
  to_add_out: nn.Linear | undefined;
  /** How the text and image tokens join (the context-parallel plan's hook; piece by piece by default). */
  jointAttention: JointAttention = pieceByPieceJoin;
  // each stream's q, k and v in one matmul once packed (PreTrainedModel.packProjections)
  readonly #imageQkv = new PackedProjections(() => [this.to_q, this.to_k, this.to_v]);
  readonly #textQkv = new PackedProjections(() => (this.add_q_proj ? [this.add_q_proj, this.add_k_proj!, this.add_v_proj!] : []));
  #imageOwner: PackedProjections | undefined; // a group packing the image q/k/v with other linears (packImageWith)

  constructor(queryDim: number, options: FluxAttentionOptions) {
    super();
    const { heads, dimHead, addedKvProjDim, preOnly = false, eps, mesh, dtype } = options;
    const layer = { mesh, dtype };
    this.heads = heads;
    this.headDim = dimHead;
    const inner = heads * dimHead;
    this.norm_q = new nn.RMSNorm(dimHead, { ...layer, eps });
    this.norm_k = new nn.RMSNorm(dimHead, { ...layer, eps });
    this.to_q = new nn.Linear(queryDim, inner, layer);
    this.to_k = new nn.Linear(queryDim, inner, layer);
    this.to_v = new nn.Linear(queryDim, inner, layer);
    this.to_out = preOnly ? undefined : new nn.ModuleList([new nn.Linear(inner, queryDim, layer), new nn.Dropout(0)]);
    if (addedKvProjDim !== undefined) {
      this.norm_added_q = new nn.RMSNorm(dimHead, { ...layer, eps });
      this.norm_added_k = new nn.RMSNorm(dimHead, { ...layer, eps });
      this.add_q_proj = new nn.Linear(addedKvProjDim, inner, layer);
      this.add_k_proj = new nn.Linear(addedKvProjDim, inner, layer);
      this.add_v_proj = new nn.Linear(addedKvProjDim, inner, layer);
      this.to_add_out = new nn.Linear(inner, queryDim, layer);
    }
  }

  // [B, S, inner] to [B, S, heads, headDim], normalised per head; the head count follows from
  // headDim (fewer per device under tp)
  #heads(t: dt.Tensor, norm?: nn.RMSNorm): dt.Tensor {
    const split = t.unflatten(-1, [-1, this.headDim]);
    return norm ? norm.forward(split) : split;
  }

  /**
   * Attention over `hidden` [B, S, D] (single-stream: the joint sequence; double-stream: the image
   * tokens, with `encoder` [B, T, D] the text tokens joined before them). Returns the attended
   * image part (projected unless preOnly) and, with `encoder`, the projected text part. `image`
   * says where the image q/k/v come from (ImageProjections); given ones are the caller's to free.
   */
  forward(hidden: dt.Tensor, encoder: dt.Tensor | undefined, rotary: RotaryTables, image: ImageProjections = 'hidden'): [dt.Tensor, dt.Tensor | undefined] {
    const qkv = image === 'hidden' ? this.#imageQkv.forward(hidden) : image === 'joined' ? this.#imageQkv.forwardJoined(hidden) : image;
    const [xq, xk, xv] = qkv as [dt.Tensor, dt.Tensor, dt.Tensor];
    let q = this.#heads(xq, this.norm_q);
    let k = this.#heads(xk, this.norm_k);
    let v = this.#heads(xv);
    const textLength = encoder?.shape[1] ?? 0;
    if (encoder) {
      // text tokens first, joined token-major (whole rows: one copy per part)
      const [eq, ek, ev] = this.#textQkv.forward(encoder) as [dt.Tensor, dt.Tensor, dt.Tensor];
      q = this.jointAttention.joinHeads([this.#heads(eq, this.norm_added_q), q]);
      k = this.jointAttention.joinHeads([this.#heads(ek, this.norm_added_k), k]);
      v = this.jointAttention.joinHeads([this.#heads(ev), v]);
    }
    // q and k rotated as [B, S, heads, headDim] (diffusers' sequence_dim=1): in the single
    // blocks the per-head norm and the rotary then run as one kernel on GPUs (the controller's
    // rms_norm_rotary_emb). Attention over [B, heads, S, headDim] views: q, k and v keep their
    // token-major layout, so the output flattens back to tokens without a copy.
    q = dt.F.applyRotaryEmb(q, rotary, { sequenceDim: 1 }).transpose(1, 2);
    k = dt.F.applyRotaryEmb(k, rotary, { sequenceDim: 1 }).transpose(1, 2);
    const out = dt.F.scaledDotProductAttention(q, k, v.transpose(1, 2)).transpose(1, 2).flatten(2);
    if (!encoder) return [out, undefined];
    const [text, attended] = this.jointAttention.split(out, [textLength, out.shape[1]! - textLength], 1) as [dt.Tensor, dt.Tensor];
    return [(this.to_out!.at(0) as nn.Linear).forward(attended), this.to_add_out!.forward(text)];
  }

  /**
   * The image q/k/v adapters' A, stacked beside their packed weights (PackedProjections.loraA),
   * or undefined: a single block's proj_mlp shares their join (nn.shareLoraJoin), and forward()
   * with `joined` then reads that join as `hidden`.
   */
  imageLoraA(): dt.Tensor | undefined {
    return this.#imageQkv.loraA();
  }

  /**
   * The image q/k/v are packed in `group` with other linears of one input (a single block's FP8
   * proj_mlp), whose owner projects them and hands them to forward(): while that group is
   * packed, packProjections() leaves them there.
   */
  packImageWith(group: PackedProjections): void {
    this.#imageOwner = group;
  }

  /** Packs each stream's q, k and v projections into one buffer, run as one matmul (PackedProjections). */
  packProjections(): number {
    const owned = this.#imageOwner?.packed === true;
    if (owned) this.#imageQkv.releaseLora(); // what an earlier pack of its own left
    const image = !owned && this.#imageQkv.pack();
    return Number(image) + Number(this.#textQkv.pack());
  }
}
