// How SD3Transformer2DModel maps onto mesh dims, as data: parallelize (parallel/parallelize.ts)
// applies it from outside the model. Its batch is split by the caller ('dp', and 'cfg' for a
// pipeline's guidance batch: batchPlacementsOver), and the model keeps it.
import type { ContextParallelPlan } from '../../parallel/context_parallel.js';
import { ulyssesHeadsJoin } from '../../parallel/joint_attention.js';
import type { ParallelPlan } from '../../parallel/parallelize.js';
import type { TpPlan, TpStyle } from '../../parallel/tp_plan.js';

const attentionPlan = (prefix: string, joint: boolean): Record<string, TpStyle> => ({
  [`${prefix}.to_q`]: 'colwise',
  [`${prefix}.to_k`]: 'colwise',
  [`${prefix}.to_v`]: 'colwise',
  [`${prefix}.to_out.0`]: 'rowwise',
  ...(joint ? { [`${prefix}.add_q_proj`]: 'colwise', [`${prefix}.add_k_proj`]: 'colwise', [`${prefix}.add_v_proj`]: 'colwise', [`${prefix}.to_add_out`]: 'rowwise' } : {}),
});

/** Heads of every attention and the feed-forwards' hidden features split over 'tp' (Megatron: one all-reduce per pair). */
export const sd3TpPlan: TpPlan = {
  ...attentionPlan('transformer_blocks.*.attn', true),
  ...attentionPlan('transformer_blocks.*.attn2', false),
  'transformer_blocks.*.ff.net.0.proj': 'colwise',
  'transformer_blocks.*.ff.net.2': 'rowwise',
  'transformer_blocks.*.ff_context.net.0.proj': 'colwise',
  'transformer_blocks.*.ff_context.net.2': 'rowwise',
};

/**
 * Both token streams split over 'ulysses' / 'ring' from their embeddings (pos_embed,
 * context_embedder) to proj_out, where they are gathered; the joint attention trades each
 * stream's tokens for heads over 'ulysses' and joins the streams piece by piece over 'ring'
 * (ulyssesHeadsJoin; heads must divide 'ulysses').
 */
export const sd3ContextParallelPlan: ContextParallelPlan = {
  modules: {
    pos_embed: { splitOutput: 1 },
    context_embedder: { splitOutput: 1 },
    proj_out: { gatherOutput: true },
  },
  jointAttention: ulyssesHeadsJoin,
};

/** SD3Transformer2DModel's plans: sd3TpPlan and sd3ContextParallelPlan. */
export const sd3ParallelPlan: ParallelPlan = { tp: sd3TpPlan, cp: sd3ContextParallelPlan };
