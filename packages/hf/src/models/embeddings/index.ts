// The diffusion transformers' shared embeddings (diffusers' embeddings.py): timesteps, pooled
// text, guidance, and Flux's rotary position tables.
export { CombinedTimestepTextProjEmbeddings, CombinedTimestepGuidanceTextProjEmbeddings } from './combined_timestep_embeddings.js';
export { TimestepEmbedding } from './timestep_embedding.js';
export { PixArtAlphaTextProjection } from './text_projection.js';
export { FluxPosEmbed } from './rotary_pos_embed.js';
