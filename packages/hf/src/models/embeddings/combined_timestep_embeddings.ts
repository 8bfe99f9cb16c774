// The conditioning vector of Flux and SD3 as diffusers' CombinedTimestepTextProjEmbeddings (the
// timestep's embedding plus the pooled text's projection) and
// CombinedTimestepGuidanceTextProjEmbeddings (plus the guidance scale's embedding, FLUX.1-dev).
// The timesteps are taken as given (Flux's model multiplies them by 1000 before). Each forward
// frees its intermediates as it ends: a step's small kernels then hand on one tensor, and a GPU
// worker replays them as one CUDA graph (graph_replays' pieces) instead of copying each out.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { PixArtAlphaTextProjection } from './text_projection.js';
import { TimestepEmbedding, timestepSinusoids } from './timestep_embedding.js';

const PROJ_CHANNELS = 256; // diffusers' Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
const project = (t: dt.Tensor, dtype: dt.DType) => timestepSinusoids(t, PROJ_CHANNELS, { flipSinToCos: true, downscaleFreqShift: 0 }).to(dtype);

/** diffusers' CombinedTimestepTextProjEmbeddings: the timestep's embedding plus the pooled text's projection (SD3, FLUX.1-schnell); checkpoint keys time_text_embed.*. */
export class CombinedTimestepTextProjEmbeddings extends nn.Module {
  /** The MLP over the timestep's 256 sinusoids. */
  timestep_embedder: TimestepEmbedding;
  /** The projection of the pooled text embedding (SiLU). */
  text_embedder: PixArtAlphaTextProjection;

  constructor(embeddingDim: number, pooledProjectionDim: number, options: ModelOptions) {
    super();
    this.timestep_embedder = new TimestepEmbedding(PROJ_CHANNELS, embeddingDim, options);
    this.text_embedder = new PixArtAlphaTextProjection(pooledProjectionDim, embeddingDim, { ...options, actFn: 'silu' });
  }

  /** [N, embeddingDim] for `timestep` [N] and `pooledProjection` [N, pooledProjectionDim]. */
  forward(timestep: dt.Tensor, pooledProjection: dt.Tensor): dt.Tensor {
    return dt.tidy(() => {
      const time = this.timestep_embedder.forward(project(timestep, pooledProjection.dtype));
      return time.add(this.text_embedder.forward(pooledProjection));
    });
  }
}

/** diffusers' CombinedTimestepGuidanceTextProjEmbeddings: CombinedTimestepTextProjEmbeddings plus the guidance scale's embedding (FLUX.1-dev); checkpoint keys time_text_embed.*. */
export class CombinedTimestepGuidanceTextProjEmbeddings extends nn.Module {
  /** The MLP over the timestep's 256 sinusoids. */
  timestep_embedder: TimestepEmbedding;
  /** The MLP over the guidance scale's 256 sinusoids. */
  guidance_embedder: TimestepEmbedding;
  /** The projection of the pooled text embedding (SiLU). */
  text_embedder: PixArtAlphaTextProjection;

  constructor(embeddingDim: number, pooledProjectionDim: number, options: ModelOptions) {
    super();
    this.timestep_embedder = new TimestepEmbedding(PROJ_CHANNELS, embeddingDim, options);
    this.guidance_embedder = new TimestepEmbedding(PROJ_CHANNELS, embeddingDim, options);
    this.text_embedder = new PixArtAlphaTextProjection(pooledProjectionDim, embeddingDim, { ...options, actFn: 'silu' });
  }

  /** [N, embeddingDim] for `timestep` [N], `guidance` [N] and `pooledProjection` [N, pooledProjectionDim]. */
  forward(timestep: dt.Tensor, guidance: dt.Tensor, pooledProjection: dt.Tensor): dt.Tensor {
    const dtype = pooledProjection.dtype;
    return dt.tidy(() => {
      const time = this.timestep_embedder.forward(project(timestep, dtype)).add(this.guidance_embedder.forward(project(guidance, dtype)));
      return time.add(this.text_embedder.forward(pooledProjection));
    });
  }
}
