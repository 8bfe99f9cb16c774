// Flux's latent layout, as diffusers' FluxPipeline: the VAE's latents [B, C, H, W] packed into 2x2
// patches, one token of C·4 features per patch ([B, (H/2)·(W/2), C·4], row-major over the
// patches), and back; the position ids of those tokens (0, row, column) and of the text tokens
// (zeros).
import * as dt from '@dtorch/api';

/** [B, C, H, W] to [B, (H/2)·(W/2), C·4] (diffusers' _pack_latents). */
export function packLatents(latents: dt.Tensor): dt.Tensor {
  const [b, c, h, w] = latents.shape as [number, number, number, number];
  return dt.tidy(() => latents.reshape([b, c, h / 2, 2, w / 2, 2]).permute([0, 2, 4, 1, 3, 5]).reshape([b, (h / 2) * (w / 2), c * 4]));
}

/** [B, (H/2)·(W/2), C·4] back to [B, C, H, W] for latents H x W (diffusers' _unpack_latents). */
export function unpackLatents(packed: dt.Tensor, latentHeight: number, latentWidth: number): dt.Tensor {
  const [b, , features] = packed.shape as [number, number, number];
  const c = features / 4;
  return dt.tidy(() => packed.reshape([b, latentHeight / 2, latentWidth / 2, c, 2, 2]).permute([0, 3, 1, 4, 2, 5]).reshape([b, c, latentHeight, latentWidth]));
}

/** The position ids [rows · cols, 3] of a rows x cols grid of packed tokens: (first, row, col) (diffusers' _prepare_latent_image_ids; Kontext marks its reference image's with first = 1). */
export function latentImageIds(rows: number, cols: number, mesh: dt.DeviceMesh, dtype: dt.DType, first = 0): dt.Tensor {
  const ids = new Float32Array(rows * cols * 3);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      ids[(r * cols + c) * 3] = first;
      ids[(r * cols + c) * 3 + 1] = r;
      ids[(r * cols + c) * 3 + 2] = c;
    }
  }
  return dt.tidy(() => {
    const t = dt.tensor(ids, { shape: [rows * cols, 3], mesh, dtype: 'float32' });
    return dtype === 'float32' ? t : t.to(dtype);
  });
}

/** The text tokens' position ids [length, 3]: zeros, as the Flux pipeline gives them. */
export function textIds(length: number, mesh: dt.DeviceMesh, dtype: dt.DType): dt.Tensor {
  return dt.zeros([length, 3], { mesh, dtype });
}
