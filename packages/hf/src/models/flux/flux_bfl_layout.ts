// Where BFL's Flux (black-forest-labs/flux, model.py) keeps each linear and norm of
// FluxTransformer2DModel, keyed by BFL's module name: per double block, per single block and
// outside the blocks. The one source for both readers of BFL names, the single-file loader and
// the LoRA converter (kohya / ComfyUI / BFL / XLabs), so that they cannot disagree.

/** One BFL module and the diffusers module(s) it holds. */
export interface BflModule {
  /** 'linear': weight and bias; 'norm': an RMSNorm, whose parameter BFL names scale and diffusers weight. */
  readonly kind: 'linear' | 'norm';
  /** diffusers module paths (relative to the block); several for a fused matrix, in the order of its output rows. */
  readonly modules: readonly string[];
  /** A fused matrix's relative row counts, one per module. */
  readonly parts?: readonly number[];
  /** BFL's matrix emits (shift, scale), diffusers' (scale, shift). */
  readonly shiftScale?: boolean;
}

/** BFL's module name -> what it holds. */
export type BflModules = Readonly<Record<string, BflModule>>;

const linear = (module: string): BflModule => ({ kind: 'linear', modules: [module] });
const norm = (module: string): BflModule => ({ kind: 'norm', modules: [module] });
const qkv = (modules: readonly string[]): BflModule => ({ kind: 'linear', modules, parts: [1, 1, 1] });

// rows in each table in the order the single-file loader plans them (and so lists missing tensors)

/** A double block's modules (double_blocks.N <-> transformer_blocks.N). */
export const fluxBflDoubleBlock: BflModules = {
  'img_mod.lin': linear('norm1.linear'),
  'txt_mod.lin': linear('norm1_context.linear'),
  'img_attn.proj': linear('attn.to_out.0'),
  'txt_attn.proj': linear('attn.to_add_out'),
  'img_mlp.0': linear('ff.net.0.proj'),
  'img_mlp.2': linear('ff.net.2'),
  'txt_mlp.0': linear('ff_context.net.0.proj'),
  'txt_mlp.2': linear('ff_context.net.2'),
  'img_attn.norm.query_norm': norm('attn.norm_q'),
  'img_attn.norm.key_norm': norm('attn.norm_k'),
  'txt_attn.norm.query_norm': norm('attn.norm_added_q'),
  'txt_attn.norm.key_norm': norm('attn.norm_added_k'),
  'img_attn.qkv': qkv(['attn.to_q', 'attn.to_k', 'attn.to_v']),
  'txt_attn.qkv': qkv(['attn.add_q_proj', 'attn.add_k_proj', 'attn.add_v_proj']),
};

/** A single block's modules (single_blocks.N <-> single_transformer_blocks.N). */
export const fluxBflSingleBlock: BflModules = {
  'modulation.lin': linear('norm.linear'),
  linear2: linear('proj_out'),
  'norm.query_norm': norm('attn.norm_q'),
  'norm.key_norm': norm('attn.norm_k'),
  // the MLP part is mlp_ratio (4) times one; diffusers hard-codes FLUX.1's [3072, 3072, 3072, 12288], the ratio fits any width
  linear1: { kind: 'linear', modules: ['attn.to_q', 'attn.to_k', 'attn.to_v', 'proj_mlp'], parts: [1, 1, 1, 4] },
};

/** Outside the blocks; guidance_in only in guidance-distilled models (guidance_embeds). */
export const fluxBflTop: BflModules = {
  'time_in.in_layer': linear('time_text_embed.timestep_embedder.linear_1'),
  'time_in.out_layer': linear('time_text_embed.timestep_embedder.linear_2'),
  'vector_in.in_layer': linear('time_text_embed.text_embedder.linear_1'),
  'vector_in.out_layer': linear('time_text_embed.text_embedder.linear_2'),
  txt_in: linear('context_embedder'),
  img_in: linear('x_embedder'),
  'final_layer.linear': linear('proj_out'),
  'guidance_in.in_layer': linear('time_text_embed.guidance_embedder.linear_1'),
  'guidance_in.out_layer': linear('time_text_embed.guidance_embedder.linear_2'),
  // diffusers' AdaLayerNormContinuous
  'final_layer.adaLN_modulation.1': { kind: 'linear', modules: ['norm_out.linear'], shiftScale: true },
};
