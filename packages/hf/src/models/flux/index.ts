// FLUX.1's transformer, as diffusers' FluxTransformer2DModel (dev and schnell): its config, the
// model, its submodules (named and nested as the checkpoint's keys, transformer_blocks.N.*,
// single_transformer_blocks.N.*) and how it maps onto mesh dims.
export { FluxTransformer2DConfig } from './flux_transformer_config.js';
export { FluxTransformer2DModel, type FluxTransformerCallOptions } from './flux_transformer_2d_model.js';
export { FluxTransformerBlock } from './flux_transformer_block.js';
export { FluxSingleTransformerBlock } from './flux_single_transformer_block.js';
export { FluxAttention, type FluxAttentionOptions, type ImageProjections, type RotaryTables } from './flux_attention.js';
export { fluxTpPlan, fluxContextParallelPlan, fluxParallelPlan, fluxSequenceParallelPlan } from './flux_plans.js';
