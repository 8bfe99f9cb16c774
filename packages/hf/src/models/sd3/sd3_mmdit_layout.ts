// Where SD3's original MMDiT (sd3_medium.safetensors, sd3.5_large.safetensors; sd-scripts'
// sd3_models.py) keeps each linear and norm of SD3Transformer2DModel, as diffusers'
// convert_sd3_transformer_checkpoint_to_diffusers maps them: diffusers' path <- the original's,
// outside the blocks and in each joint block (transformer_blocks.N <- joint_blocks.N; x_block is
// the image stream, context_block the text's). The one source for both readers of original names,
// the single-file loader and the LoRA converter (kohya / sd-scripts), so that they cannot disagree.

/** Linears outside the blocks (pos_embed.proj is the patch convolution). */
export const sd3MmditTop: Readonly<Record<string, string>> = {
  'pos_embed.proj': 'x_embedder.proj',
  'time_text_embed.timestep_embedder.linear_1': 't_embedder.mlp.0',
  'time_text_embed.timestep_embedder.linear_2': 't_embedder.mlp.2',
  context_embedder: 'context_embedder',
  'time_text_embed.text_embedder.linear_1': 'y_embedder.mlp.0',
  'time_text_embed.text_embedder.linear_2': 'y_embedder.mlp.2',
  proj_out: 'final_layer.linear',
};

/** The final adaLN: the original's rows are (shift, scale), diffusers' AdaLayerNormContinuous's (scale, shift). */
export const sd3MmditFinalNorm = { module: 'norm_out.linear', original: 'final_layer.adaLN_modulation.1' } as const;

/** A joint block's linears, every block. */
export const sd3MmditBlock: Readonly<Record<string, string>> = {
  'attn.to_out.0': 'x_block.attn.proj',
  'norm1.linear': 'x_block.adaLN_modulation.1',
  'ff.net.0.proj': 'x_block.mlp.fc1',
  'ff.net.2': 'x_block.mlp.fc2',
};

/** The text stream's output side, which the last block (context_pre_only) lacks. */
export const sd3MmditContext: Readonly<Record<string, string>> = {
  'attn.to_add_out': 'context_block.attn.proj',
  'norm1_context.linear': 'context_block.adaLN_modulation.1',
  'ff_context.net.0.proj': 'context_block.mlp.fc1',
  'ff_context.net.2': 'context_block.mlp.fc2',
};

/**
 * The last block's context adaLN: (shift, scale) rows in the original, diffusers'
 * AdaLayerNormContinuous (scale, shift); twice as many rows as its input is wide, where the other
 * blocks' (AdaLayerNormZero) have six times.
 */
export const sd3MmditLastContextNorm = { module: 'norm1_context.linear', original: 'context_block.adaLN_modulation.1' } as const;

/** Each block's fused q/k/v (the original's matrix <- diffusers' linears, in the order of its rows, equal parts). */
export const sd3MmditQkv: Readonly<Record<string, readonly string[]>> = {
  'x_block.attn.qkv': ['attn.to_q', 'attn.to_k', 'attn.to_v'],
  'context_block.attn.qkv': ['attn.add_q_proj', 'attn.add_k_proj', 'attn.add_v_proj'],
};

/** Each block's qk norms (qk_norm models: SD3.5). */
export const sd3MmditQkNorms: Readonly<Record<string, string>> = {
  'attn.norm_q.weight': 'x_block.attn.ln_q.weight',
  'attn.norm_k.weight': 'x_block.attn.ln_k.weight',
  'attn.norm_added_q.weight': 'context_block.attn.ln_q.weight',
  'attn.norm_added_k.weight': 'context_block.attn.ln_k.weight',
};

/** SD3.5's second, image-only attention (MMDiT-X) in dual_attention_layers: its fused q/k/v. */
export const sd3MmditDualQkv: Readonly<Record<string, readonly string[]>> = { 'x_block.attn2.qkv': ['attn2.to_q', 'attn2.to_k', 'attn2.to_v'] };
/** Its other linears. */
export const sd3MmditDual: Readonly<Record<string, string>> = { 'attn2.to_out.0': 'x_block.attn2.proj' };
/** Its qk norms. */
export const sd3MmditDualQkNorms: Readonly<Record<string, string>> = {
  'attn2.norm_q.weight': 'x_block.attn2.ln_q.weight',
  'attn2.norm_k.weight': 'x_block.attn2.ln_k.weight',
};
