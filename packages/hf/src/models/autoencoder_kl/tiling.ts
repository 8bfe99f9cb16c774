// Tiled encoding and decoding as diffusers' AutoencoderKL._tiled_encode / tiled_decode: the
// input cut into overlapping square tiles (stepping 1 - overlap factor of a tile), each run
// alone, each output tile blended linearly into the (already blended) tile above and to its
// left over the overlap, then cropped and put back together. Memory follows the tile size, not
// the image size.
import * as dt from '@dtorch/api';

/** One tiling: input tiles of `tile`, `step` apart; outputs blended over `extent`, cropped to `limit`. */
export interface Tiling {
  /** The side of an input tile. */
  tile: number;
  /** The distance between tiles' origins. */
  step: number;
  /** How far an output tile blends into its neighbours. */
  extent: number;
  /** The side each output tile is cropped to. */
  limit: number;
}

/** Decoding: latent tiles of `latent` (sample / 2^downsamplings), decoded tiles of `sample`. */
export function decodeTiling(sample: number, latent: number, overlapFactor: number): Tiling {
  const extent = Math.floor(sample * overlapFactor);
  return { tile: latent, step: Math.floor(latent * (1 - overlapFactor)), extent, limit: sample - extent };
}

/** Encoding: image tiles of `sample`, encoded tiles of `latent`. */
export function encodeTiling(sample: number, latent: number, overlapFactor: number): Tiling {
  const extent = Math.floor(latent * overlapFactor);
  return { tile: sample, step: Math.floor(sample * (1 - overlapFactor)), extent, limit: latent - extent };
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

/** `run` over the tiles of x [batch, c, h, w], its outputs blended and joined into one tensor. */
export function tiled(x: dt.Tensor, t: Tiling, run: (tile: dt.Tensor) => dt.Tensor): dt.Tensor {
  const [height, width] = [x.shape[2]!, x.shape[3]!];
  return dt.tidy(() => {
    const rows: dt.Tensor[][] = [];
    for (let i = 0; i < height; i += t.step) {
      const row: dt.Tensor[] = [];
      for (let j = 0; j < width; j += t.step) {
        let out = run(x.narrow(2, i, Math.min(t.tile, height - i)).narrow(3, j, Math.min(t.tile, width - j)));
        // blended into the tile above and the one to the left, both already blended, as diffusers' in-place updates leave them
        if (rows.length > 0) out = replaced(out, blend(rows.at(-1)![row.length]!, out, t.extent, 2));
        if (row.length > 0) out = replaced(out, blend(row.at(-1)!, out, t.extent, 3));
        row.push(out);
      }
      rows.push(row);
    }
    const crop = (o: dt.Tensor) => o.narrow(2, 0, Math.min(t.limit, o.shape[2]!)).narrow(3, 0, Math.min(t.limit, o.shape[3]!));
    return dt.cat(rows.map((row) => dt.cat(row.map(crop), 3)), 2);
  });
}
