// T5's encoder, as transformers' T5EncoderModel: its config, the model, its submodules (named and
// nested as the checkpoint's keys, encoder.block.N.layer.M.*) and how it maps onto mesh dims.
export { T5Config } from './t5_config.js';
export { T5EncoderModel, T5Stack, type T5EncoderOutput } from './t5_encoder_model.js';
export { T5Block, T5LayerSelfAttention } from './t5_block.js';
export { T5Attention } from './t5_attention.js';
export { T5LayerFF, T5DenseActDense, T5DenseGatedActDense } from './t5_feed_forward.js';
export { T5LayerNorm } from './t5_layer_norm.js';
export { t5TpPlan, t5ParallelPlan } from './t5_plans.js';
