// How FluxTransformer2DModel maps onto mesh dims, as data (diffusers' _cp_plan and _tp_plan of
// transformer_flux.py): parallelize (parallel/parallelize.ts) applies it from outside the model.
import type { ContextParallelPlan } from '../../parallel/context_parallel.js';
import { pieceByPieceJoin } from '../../parallel/joint_attention.js';
import type { ParallelPlan } from '../../parallel/parallelize.js';
import type { SequenceParallelPlan } from '../../parallel/sequence_parallel.js';
import type { TpPlan } from '../../parallel/tp_plan.js';

/**
 * Heads and MLP features over 'tp' (diffusers' _tp_plan): q/k/v and MLP-in colwise, the output
 * projections rowwise (one all-reduce each). The single blocks' proj_out, whose input joins the
 * attention's and the MLP's split features, keeps its whole weight; each device multiplies its
 * features by their columns and the sums are reduced once (packedLinear).
 */
export const fluxTpPlan: TpPlan = {
  'transformer_blocks.*.attn.to_q': 'colwise',
  'transformer_blocks.*.attn.to_k': 'colwise',
  'transformer_blocks.*.attn.to_v': 'colwise',
  'transformer_blocks.*.attn.to_out.0': 'rowwise',
  'transformer_blocks.*.attn.add_q_proj': 'colwise',
  'transformer_blocks.*.attn.add_k_proj': 'colwise',
  'transformer_blocks.*.attn.add_v_proj': 'colwise',
  'transformer_blocks.*.attn.to_add_out': 'rowwise',
  'transformer_blocks.*.ff.net.0.proj': 'colwise',
  'transformer_blocks.*.ff.net.2': 'rowwise',
  'transformer_blocks.*.ff_context.net.0.proj': 'colwise',
  'transformer_blocks.*.ff_context.net.2': 'rowwise',
  'single_transformer_blocks.*.attn.to_q': 'colwise',
  'single_transformer_blocks.*.attn.to_k': 'colwise',
  'single_transformer_blocks.*.attn.to_v': 'colwise',
  'single_transformer_blocks.*.proj_mlp': 'colwise',
};

/**
 * The image and text tokens split over 'ulysses' / 'ring' as the model gets them, every
 * batch-first input over 'dp' (and 'cfg' where it divides); the tokens' position ids split as
 * the rotary tables are made (pos_embed: the tables of the same ids are kept from call to call);
 * the streams joined piece by piece, so attention runs Ulysses or ring attention on each
 * device's own tokens; the image tokens gathered after proj_out.
 */
export const fluxContextParallelPlan: ContextParallelPlan = {
  modules: {
    '': {
      inputs: {
        0: { tokens: 1, batch: true }, // hiddenStates
        encoderHiddenStates: { tokens: 1, batch: true },
        pooledProjections: { batch: true },
        timestep: { batch: true },
        guidance: { batch: true },
      },
    },
    pos_embed: { inputs: { 0: { tokens: 0 }, 1: { tokens: 0 } } }, // txtIds, imgIds
    proj_out: { gatherOutput: true },
  },
  jointAttention: pieceByPieceJoin,
};

/** FluxTransformer2DModel's plans: fluxTpPlan and fluxContextParallelPlan. */
export const fluxParallelPlan: ParallelPlan = { tp: fluxTpPlan, cp: fluxContextParallelPlan };

/**
 * The forward's inputs by name, as fluxContextParallelPlan places them (for placeInputs).
 * @deprecated The model places its inputs itself (fluxContextParallelPlan, applied by parallelize).
 */
export const fluxSequenceParallelPlan: SequenceParallelPlan = {
  sequence: { hiddenStates: 1, encoderHiddenStates: 1, imgIds: 0, txtIds: 0 },
  batch: ['hiddenStates', 'encoderHiddenStates', 'pooledProjections', 'timestep', 'guidance'],
};
