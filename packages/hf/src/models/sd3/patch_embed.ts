// SD3's patch embedding, as diffusers' PatchEmbed: the latents cut into patches (proj) plus the
// 2-D sincos position embedding cropped from the middle of a pos_embed_max_size grid. The
// conditioning vector (CombinedTimestepTextProjEmbeddings) is shared with Flux, in
// ../embeddings/combined_timestep_embeddings.ts.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { ModelOptions } from '../../loading/pretrained_model.js';

/** @inline Where the weights live, both given. */
type Layout = Required<ModelOptions>;

/**
 * The 2-D sincos position embedding [gridSize², dim] of a square grid, row-major (as
 * diffusers' get_2d_sincos_pos_embed with base_size and interpolation_scale): the first half of
 * each row encodes the column, the second half the row, each as [sin, cos] of position ·
 * 10000^(-2i / (dim / 2)). Positions in float32, the rest in float64 (as diffusers), then float32.
 */
export function sincosPositionEmbedding(dim: number, gridSize: number, baseSize: number, interpolationScale = 1): Float32Array {
  const half = dim / 2;
  const quarter = half / 2;
  // diffusers: omega = arange(D / 2) / (D / 2), then 1 / 10000**omega, with D the width of one axis
  const omega = Float64Array.from({ length: quarter }, (_, i) => 1 / 10000 ** (i / quarter));
  const f = Math.fround;
  const position = Float64Array.from({ length: gridSize }, (_, i) => f(f(i / f(gridSize / baseSize)) / interpolationScale));
  const out = new Float32Array(gridSize * gridSize * dim);
  for (let r = 0; r < gridSize; r++) {
    for (let c = 0; c < gridSize; c++) {
      const row = out.subarray((r * gridSize + c) * dim, (r * gridSize + c + 1) * dim);
      for (let i = 0; i < quarter; i++) {
        const [x, y] = [position[c]! * omega[i]!, position[r]! * omega[i]!];
        row[i] = Math.sin(x);
        row[quarter + i] = Math.cos(x);
        row[half + i] = Math.sin(y);
        row[half + quarter + i] = Math.cos(y);
      }
    }
  }
  return out;
}

/** PatchEmbed: latents [B, C, H, W] to tokens [B, (H/p)(W/p), dim] plus the cropped position embedding. */
export class PatchEmbed extends nn.Module {
  /** The config's patch_size. */
  readonly patchSize: number;
  /** The config's pos_embed_max_size: the side of the position embedding's grid, in patches. */
  readonly posEmbedMaxSize: number;
  /** in_channels to dim, a patch_size conv of stride patch_size (checkpoint keys pos_embed.proj.*). */
  proj: nn.Conv2d;
  /** The buffer [1, posEmbedMaxSize², dim] of the sincos position embedding (checkpoint key pos_embed.pos_embed). */
  declare pos_embed: dt.Tensor;

  constructor(sampleSize: number, patchSize: number, inChannels: number, dim: number, posEmbedMaxSize: number, options: Layout) {
    super();
    this.patchSize = patchSize;
    this.posEmbedMaxSize = posEmbedMaxSize;
    this.proj = new nn.Conv2d(inChannels, dim, patchSize, { ...options, stride: patchSize });
    // a persistent buffer in diffusers (saved in the checkpoint, loaded from it); computed here
    // when the model is built with initial values
    const shape = [1, posEmbedMaxSize * posEmbedMaxSize, dim];
    const buffer = nn.initSkipped()
      ? dt.empty(shape, options)
      : dt.tidy(() => {
          const values = sincosPositionEmbedding(dim, posEmbedMaxSize, Math.floor(sampleSize / patchSize));
          const t = dt.fromBuffer(new Uint8Array(values.buffer), 'float32', shape, { mesh: options.mesh });
          return options.dtype === 'float32' ? t : t.to(options.dtype);
        });
    this.registerBuffer('pos_embed', buffer);
  }

  /** The position embedding [1, h·w, dim] of an h x w grid of patches, cut from the middle of the max grid. */
  croppedPosEmbed(h: number, w: number): dt.Tensor {
    const max = this.posEmbedMaxSize;
    if (h > max || w > max) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `SD3Transformer2DModel: the latent is ${h} x ${w} patches, but pos_embed_max_size is ${max}; use a smaller image (at most ${max * this.patchSize} latent pixels a side)`);
    }
    const [top, left] = [Math.floor((max - h) / 2), Math.floor((max - w) / 2)];
    const grid = this.pos_embed.reshape([1, max, max, -1]);
    return grid.narrow(1, top, h).narrow(2, left, w).reshape([1, h * w, -1]);
  }

  /** The tokens [B, (H/p)(W/p), dim] of `latent` [B, C, H, W], position embedding added. */
  forward(latent: dt.Tensor): dt.Tensor {
    const [h, w] = [latent.shape[2]! / this.patchSize, latent.shape[3]! / this.patchSize];
    const pos = this.croppedPosEmbed(h, w);
    const tokens = dt.tidy(() => this.patchRows(latent, h, w));
    return tokens.add(pos).to(tokens.dtype);
  }

  // proj, the conv of stride p, as the matmul it is: each p x p patch a row [C·p·p] times the
  // weight as a matrix. The same values as the conv's (within rounding), without a convolution
  // library's per-call planning and its two layout transforms around the kernel, which left the
  // GPU idle at the start of each step.
  private patchRows(latent: dt.Tensor, h: number, w: number): dt.Tensor {
    const [b, c] = latent.shape as [number, number];
    const p = this.patchSize;
    const rows = latent.reshape([b, c, h, p, w, p]).permute([0, 2, 4, 1, 3, 5]).reshape([b, h * w, c * p * p]);
    return dt.F.linear(rows, this.proj.weight.reshape([this.proj.outChannels, c * p * p]), this.proj.bias);
  }
}
