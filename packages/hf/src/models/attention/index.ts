// The diffusion transformers' shared attention parts (diffusers' attention.py): the feed-forward,
// and linears packed into one matmul (fuse_qkv_projections).
export { FeedForward, GELUProjection, type FeedForwardOptions } from './feed_forward.js';
export { PackedProjections, hasPackedProjections, type HasPackedProjections } from './packed_projections.js';
