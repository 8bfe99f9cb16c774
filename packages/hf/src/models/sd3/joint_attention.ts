// SD3's attention (diffusers' Attention with JointAttnProcessor2_0): the image stream's q/k/v
// (to_q/to_k/to_v) and, for joint attention, the text stream's (add_q_proj/add_k_proj/
// add_v_proj), each optionally normalised per head (norm_q/norm_k/norm_added_q/norm_added_k),
// attend together over cat(image, text) along the sequence; the output is split back,
// through to_out.0 (image) and to_add_out (text; absent in the last block, context_pre_only).
// The streams join and split back through the context-parallel plan's joint-attention hook.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { SD3QkNorm } from './sd3_transformer_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { pieceByPieceJoin, type HasJointAttention, type JointAttention } from '../../parallel/joint_attention.js';
import { PackedProjections, type HasPackedProjections } from '../attention/packed_projections.js';

/** @inline Where the weights live, both given. */
type Layout = Required<ModelOptions>;

/** What an SD3Attention has: heads, norms, and which of the text stream's projections. */
export interface SD3AttentionOptions {
  /** The config's num_attention_heads. */
  heads: number;
  /** The config's attention_head_dim. */
  headDim: number;
  /** The config's qk_norm: the per-head norm of queries and keys, or none. */
  qkNorm: SD3QkNorm | null;
  /** Whether the attention has the text stream's projections (JointTransformerBlock's attn; not attn2). */
  joint: boolean;
  /** The text stream's output is not used (the last block): no to_add_out. */
  contextPreOnly: boolean;
}

const headNorm = (kind: SD3QkNorm | null, headDim: number, options: Layout): nn.LayerNorm | nn.RMSNorm | undefined =>
  kind === null ? undefined : kind === 'rms_norm' ? new nn.RMSNorm(headDim, { ...options, eps: 1e-6 }) : new nn.LayerNorm(headDim, { ...options, eps: 1e-6 });

/** diffusers' Attention with JointAttnProcessor2_0: the image and text streams attend together over cat(image, text); a block's attn (or attn2, image only). */
export class SD3Attention extends nn.Module implements HasPackedProjections, HasJointAttention {
  /** Attention heads. */
  readonly heads: number;
  /** Each head's width. */
  readonly headDim: number;
  /** The image stream's query projection, dim to heads x headDim. */
  to_q: nn.Linear;
  /** The image stream's key projection. */
  to_k: nn.Linear;
  /** The image stream's value projection. */
  to_v: nn.Linear;
  /** The per-head norm of the image queries (qk_norm); undefined without one. */
  norm_q: nn.LayerNorm | nn.RMSNorm | undefined;
  /** The per-head norm of the image keys (qk_norm); undefined without one. */
  norm_k: nn.LayerNorm | nn.RMSNorm | undefined;
  /** The text stream's key projection (joint attention only). */
  add_k_proj: nn.Linear | undefined;
  /** The text stream's value projection (joint attention only). */
  add_v_proj: nn.Linear | undefined;
  /** The text stream's query projection (joint attention only). */
  add_q_proj: nn.Linear | undefined;
  /** The per-head norm of the text queries (joint attention with qk_norm only). */
  norm_added_q: nn.LayerNorm | nn.RMSNorm | undefined;
  /** The per-head norm of the text keys (joint attention with qk_norm only). */
  norm_added_k: nn.LayerNorm | nn.RMSNorm | undefined;
  /** to_out.0, the image stream's output projection (to_out.1 a dropout). */
  to_out: nn.ModuleList;
  /** The text stream's output projection; undefined in attn2 and in the last block (context_pre_only). */
  to_add_out: nn.Linear | undefined;
  /** How the image and text streams join (the context-parallel plan's hook; piece by piece by default). */
  jointAttention: JointAttention = pieceByPieceJoin;
  // each stream's q, k and v in one matmul once packed (PreTrainedModel.packProjections)
  readonly #imageQkv = new PackedProjections(() => [this.to_q, this.to_k, this.to_v]);
  readonly #textQkv = new PackedProjections(() => (this.add_q_proj ? [this.add_q_proj, this.add_k_proj!, this.add_v_proj!] : []));

  constructor(dim: number, o: SD3AttentionOptions, options: Layout) {
    super();
    this.heads = o.heads;
    this.headDim = o.headDim;
    const inner = o.heads * o.headDim;
    this.to_q = new nn.Linear(dim, inner, options);
    this.to_k = new nn.Linear(dim, inner, options);
    this.to_v = new nn.Linear(dim, inner, options);
    this.norm_q = headNorm(o.qkNorm, o.headDim, options);
    this.norm_k = headNorm(o.qkNorm, o.headDim, options);
    this.add_k_proj = o.joint ? new nn.Linear(dim, inner, options) : undefined;
    this.add_v_proj = o.joint ? new nn.Linear(dim, inner, options) : undefined;
    this.add_q_proj = o.joint ? new nn.Linear(dim, inner, options) : undefined;
    this.norm_added_q = o.joint ? headNorm(o.qkNorm, o.headDim, options) : undefined;
    this.norm_added_k = o.joint ? headNorm(o.qkNorm, o.headDim, options) : undefined;
    this.to_out = new nn.ModuleList([new nn.Linear(inner, dim, options), new nn.Dropout(0)]);
    this.to_add_out = o.joint && !o.contextPreOnly ? new nn.Linear(inner, dim, options) : undefined;
  }

  // [B, N, heads·headDim] to token-major [B, N, heads, headDim], normalised per head when the
  // model has a norm. Kept token-major until attention: the streams join by whole rows (one
  // contiguous copy per part, not a strided gather), and attention's output in that layout
  // flattens back to tokens without a copy
  private heads_(x: dt.Tensor, norm: nn.LayerNorm | nn.RMSNorm | undefined): dt.Tensor {
    const split = x.unflatten(2, [this.heads, this.headDim]);
    return norm ? norm.forward(split) : split;
  }

  /** Self-attention over `x` [B, N, dim] alone (attn2), or joint attention with `context` [B, M, dim]; returns [image out, text out]. */
  forward(x: dt.Tensor, context?: dt.Tensor): [dt.Tensor, dt.Tensor | undefined] {
    const [xq, xk, xv] = this.#imageQkv.forward(x) as [dt.Tensor, dt.Tensor, dt.Tensor];
    let q = this.heads_(xq, this.norm_q);
    let k = this.heads_(xk, this.norm_k);
    let v = this.heads_(xv, undefined);
    const toOut = this.to_out.at(0) as nn.Linear;
    // self-attention (attn2): sdpa runs Ulysses and/or ring attention itself when the tokens
    // are split over 'ulysses' / 'ring'
    if (!context || !this.add_q_proj) return [toOut.forward(tokens(attend(q, k, v))), undefined];
    // JointAttnProcessor2_0's order: the image tokens first, then the text tokens. Queries are
    // joined token-major, so that the output is too and flattens back to tokens without a copy;
    // keys and values head-major, [B, heads, N + M, headDim] with each head's rows together, as
    // attention streams them once per query block (the join copies them either way)
    const joint = (image: dt.Tensor, text: dt.Tensor, headMajor: boolean) => dt.tidy(() => this.jointAttention.joinHeads([image, text], headMajor));
    const [cq, ck, cv] = this.#textQkv.forward(context) as [dt.Tensor, dt.Tensor, dt.Tensor];
    q = joint(q, this.heads_(cq, this.norm_added_q), false);
    k = joint(k, this.heads_(ck, this.norm_added_k), true);
    v = joint(v, this.heads_(cv, undefined), true);
    const attended = dt.F.scaledDotProductAttention(q.transpose(1, 2), k, v).transpose(1, 2);
    const [imageOut, textOut] = this.jointAttention.split(attended, [x.shape[1]!, context.shape[1]!], 1).map(tokens) as [dt.Tensor, dt.Tensor];
    return [toOut.forward(imageOut), this.to_add_out ? this.to_add_out.forward(textOut) : textOut];
  }

  /** Packs each stream's q, k and v projections into one buffer, run as one matmul (PackedProjections). */
  packProjections(): number {
    return Number(this.#imageQkv.pack()) + Number(this.#textQkv.pack());
  }
}

// sdpa over token-major [B, N, heads, headDim] q, k, v (as [B, heads, N, headDim] views); the output token-major too
const attend = (q: dt.Tensor, k: dt.Tensor, v: dt.Tensor) => dt.F.scaledDotProductAttention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2);

// token-major [B, N, heads, headDim] back to [B, N, heads·headDim]
const tokens = (t: dt.Tensor) => t.flatten(2);

