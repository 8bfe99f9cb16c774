// How T5EncoderModel maps onto mesh dims, as data: parallelize (parallel/parallelize.ts) applies
// it from outside the model. Its batch is split over 'dp' as its inputs come (batchInput).
import type { ParallelPlan } from '../../parallel/parallelize.js';
import type { TpPlan } from '../../parallel/tp_plan.js';

/** Heads and feed-forward features over 'tp': q/k/v and wi colwise, o and wo rowwise (one all-reduce each). */
export const t5TpPlan: TpPlan = {
  'encoder.block.*.layer.0.SelfAttention.q': 'colwise',
  'encoder.block.*.layer.0.SelfAttention.k': 'colwise',
  'encoder.block.*.layer.0.SelfAttention.v': 'colwise',
  'encoder.block.*.layer.0.SelfAttention.o': 'rowwise',
  'encoder.block.*.layer.0.SelfAttention.relative_attention_bias': 'colwise', // per-head biases, split as the heads
  'encoder.block.*.layer.1.DenseReluDense.wi': 'colwise',
  'encoder.block.*.layer.1.DenseReluDense.wi_0': 'colwise',
  'encoder.block.*.layer.1.DenseReluDense.wi_1': 'colwise',
  'encoder.block.*.layer.1.DenseReluDense.wo': 'rowwise',
};

/** T5EncoderModel's plans: t5TpPlan (no context-parallel plan: its tokens stay whole). */
export const t5ParallelPlan: ParallelPlan = { tp: t5TpPlan };
