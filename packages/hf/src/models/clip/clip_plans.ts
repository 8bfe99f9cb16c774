// How CLIP's text models map onto mesh dims, as data: parallelize (parallel/parallelize.ts)
// applies it from outside the model. Their batch is split over 'dp' as their inputs come (batchInput).
import type { ParallelPlan } from '../../parallel/parallelize.js';
import type { TpPlan } from '../../parallel/tp_plan.js';

/** Heads and MLP features over 'tp': q/k/v and fc1 colwise, out_proj and fc2 rowwise (one all-reduce each). */
export const clipTpPlan: TpPlan = {
  'text_model.encoder.layers.*.self_attn.q_proj': 'colwise',
  'text_model.encoder.layers.*.self_attn.k_proj': 'colwise',
  'text_model.encoder.layers.*.self_attn.v_proj': 'colwise',
  'text_model.encoder.layers.*.self_attn.out_proj': 'rowwise',
  'text_model.encoder.layers.*.mlp.fc1': 'colwise',
  'text_model.encoder.layers.*.mlp.fc2': 'rowwise',
};

/** CLIPTextModel's and CLIPTextModelWithProjection's plans: clipTpPlan (no context-parallel plan: their tokens stay whole). */
export const clipParallelPlan: ParallelPlan = { tp: clipTpPlan };
