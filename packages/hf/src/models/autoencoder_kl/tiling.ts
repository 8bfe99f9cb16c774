// Tiled decoding as diffusers' AutoencoderKL.tiled_decode: the latents cut into overlapping
// square tiles (tileLatentMinSize, stepping 1 - overlap factor), each decoded alone, each tile
// blended linearly into the (already blended) tile above and to its left over the overlap, then
// cropped and put back together. Memory follows the tile size, not the image size.
import * as dt from '@dtorch/api';

export interface TileSizes {
  /** The side of a decoded tile (the config's sample_size). */
  sample: number;
  /** The side of a latent tile: sample / 2^downsamplings. */
  latent: number;
  /** 0.25 in diffusers. */
  overlapFactor: number;
}

// b's first `extent` entries along `dim` faded in from a's last ones: a·(1 − y/e) + b·(y/e)
function blend(a: dt.Tensor, b: dt.Tensor, extent: number, dim: 2 | 3): dt.Tensor {
  const e = Math.min(a.shape[dim]!, b.shape[dim]!, extent);
  if (e <= 0) return b.clone();
  return dt.tidy(() => {
    const shape = dim === 2 ? [1, 1, e, 1] : [1, 1, 1, e];
    const w = dt.arange(e, undefined, 1, { mesh: b.mesh, dtype: b.dtype }).div(e).reshape(shape);
    const faded = a.narrow(dim, a.shape[dim]! - e, e).mul(dt.sub(1, w)).add(b.narrow(dim, 0, e).mul(w));
    const rest = b.shape[dim]! - e;
    return rest > 0 ? dt.cat([faded, b.narrow(dim, e, rest)], dim) : faded;
  });
}

function replaced(old: dt.Tensor, next: dt.Tensor): dt.Tensor {
  old.dispose();
  return next;
}

/** `decodeTile` over the tiles of z [batch, c, h, w], blended and joined into one image. */
export function tiledDecode(z: dt.Tensor, sizes: TileSizes, decodeTile: (tile: dt.Tensor) => dt.Tensor): dt.Tensor {
  const step = Math.floor(sizes.latent * (1 - sizes.overlapFactor));
  const extent = Math.floor(sizes.sample * sizes.overlapFactor);
  const limit = sizes.sample - extent;
  const [height, width] = [z.shape[2]!, z.shape[3]!];
  return dt.tidy(() => {
    const rows: dt.Tensor[][] = [];
    for (let i = 0; i < height; i += step) {
      const row: dt.Tensor[] = [];
      for (let j = 0; j < width; j += step) {
        const tile = z.narrow(2, i, Math.min(sizes.latent, height - i)).narrow(3, j, Math.min(sizes.latent, width - j));
        let decoded = decodeTile(tile);
        // blended into the tile above and the one to the left, both already blended, as diffusers' in-place updates leave them
        if (rows.length > 0) decoded = replaced(decoded, blend(rows.at(-1)![row.length]!, decoded, extent, 2));
        if (row.length > 0) decoded = replaced(decoded, blend(row.at(-1)!, decoded, extent, 3));
        row.push(decoded);
      }
      rows.push(row);
    }
    const crop = (t: dt.Tensor) => t.narrow(2, 0, Math.min(limit, t.shape[2]!)).narrow(3, 0, Math.min(limit, t.shape[3]!));
    return dt.cat(rows.map((row) => dt.cat(row.map(crop), 3)), 2);
  });
}
