// Stable Diffusion 3's MMDiT, as diffusers' SD3Transformer2DModel (SD3 and SD3.5): its config,
// the model, its submodules (named and nested as the checkpoint's keys, pos_embed.*,
// transformer_blocks.N.*) and how it maps onto mesh dims.
export { SD3Transformer2DConfig, sd3QkNorms, type SD3QkNorm } from './sd3_transformer_config.js';
export { SD3Transformer2DModel, type SD3TransformerCallOptions } from './sd3_transformer_2d_model.js';
export { PatchEmbed } from './patch_embed.js';
export { JointTransformerBlock, type JointBlockOptions } from './joint_transformer_block.js';
export { SD3Attention, type SD3AttentionOptions } from './joint_attention.js';
export { SD35AdaLayerNormZeroX } from './sd35_ada_layer_norm_zero_x.js';
export { sd3TpPlan, sd3ContextParallelPlan, sd3ParallelPlan } from './sd3_plans.js';
