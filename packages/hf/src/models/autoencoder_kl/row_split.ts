// An image activation [batch, channels, rows, width] split by rows into pieces, each a tensor of
// its own on one device (a rank's 1-device mesh), as xDiT's DistVAE lays a patch-parallel VAE
// out. The engine's conv2d and group_norm split only the batch, so the VAE's patch-parallel
// forward runs each piece alone and moves between the pieces only what crosses a piece's edge:
// a halo row for each 3x3 convolution, small per-group sums for each group norm, and the keys and
// values of the mid block's attention. Every move is an ordinary cross-mesh redistribute.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

const replicate = [dt.Replicate()];

/** `t` on `mesh` (a 1-device mesh), moved there when it is elsewhere. */
function onMesh(t: dt.Tensor, mesh: dt.DeviceMesh): dt.Tensor {
  return t.mesh.equals(mesh) ? t : t.redistribute(mesh, replicate);
}

/** The pieces of a row-split image activation, top to bottom, each a [batch, channels, rows, width] tensor on its own device. */
export class RowSplit {
  /** One per device, top to bottom; none is empty. */
  readonly pieces: readonly dt.Tensor[];

  constructor(pieces: readonly dt.Tensor[]) {
    this.pieces = pieces;
  }

  /** The 1-device mesh of each piece. */
  get meshes(): dt.DeviceMesh[] {
    return this.pieces.map((p) => p.mesh);
  }

  /** The rows of all the pieces together. */
  get rows(): number {
    return this.pieces.reduce((sum, p) => sum + p.shape[2]!, 0);
  }

  /** `fn` on each piece alone (each in its own tidy), e.g. an activation or a 1x1 convolution. */
  map(fn: (piece: dt.Tensor, index: number) => dt.Tensor): RowSplit {
    return new RowSplit(this.pieces.map((p, i) => dt.tidy(() => fn(p, i))));
  }

  /**
   * Each piece with `halo` rows above and below: its neighbours' edge rows, zeros at the
   * image's top and bottom, so that a convolution with no row padding over it gives the piece's
   * rows of the convolution of the whole image padded by `halo` rows.
   */
  haloed(halo: number): RowSplit {
    return this.withNeighbours(halo, halo);
  }

  /**
   * Each piece with the first `count` rows of the piece below it under it (zeros under the
   * last), for a strided convolution that reads past a piece's bottom edge.
   */
  withRowsBelow(count: number): RowSplit {
    return this.withNeighbours(0, count);
  }

  /** Per piece, the sum of the pieces' `parts` (one small tensor per piece, on its device), on that piece's device. */
  allReduceSum(parts: readonly dt.Tensor[]): dt.Tensor[] {
    const meshes = this.meshes;
    // summed on the first piece's device in piece order, so every piece gets the same bits
    const total = parts.slice(1).reduce((sum, part) => sum.add(onMesh(part, meshes[0]!)), parts[0]!);
    return meshes.map((mesh) => (mesh.equals(total.mesh) ? total.clone() : onMesh(total, mesh)));
  }

  /** Per piece, the pieces' `parts` joined along `dim` in piece order, on that piece's device (an all-gather). */
  allGather(parts: readonly dt.Tensor[], dim: number): dt.Tensor[] {
    return this.meshes.map((mesh) => dt.cat(parts.map((part) => onMesh(part, mesh)), dim));
  }

  /** Frees the pieces. */
  dispose(): void {
    dt.dispose([...this.pieces]);
  }

  private withNeighbours(above: number, below: number): RowSplit {
    const pieces = this.pieces;
    return this.map((piece, i) => {
      const mesh = piece.mesh;
      const parts: dt.Tensor[] = [];
      if (above > 0 && i > 0) parts.push(onMesh(edgeRows(pieces[i - 1]!, above, 'bottom'), mesh));
      parts.push(piece);
      if (below > 0 && i < pieces.length - 1) parts.push(onMesh(edgeRows(pieces[i + 1]!, below, 'top'), mesh));
      const joined = parts.length === 1 ? piece : dt.cat(parts, 2);
      const [top, bottom] = [i === 0 ? above : 0, i === pieces.length - 1 ? below : 0];
      if (top + bottom > 0) return dt.F.pad(joined, [0, 0, top, bottom]);
      return joined === piece ? piece.clone() : joined;
    });
  }
}

// the first or last `count` rows of a piece (a neighbour's halo); a piece needs at least that many
function edgeRows(piece: dt.Tensor, count: number, side: 'top' | 'bottom'): dt.Tensor {
  const rows = piece.shape[2]!;
  if (rows < count) throw new DTorchError(ErrorCode.Internal, `a row-split piece of ${rows} rows cannot give its neighbour ${count} halo rows`);
  return piece.narrow(2, side === 'top' ? 0 : rows - count, count);
}

/** torch.chunk's sizes of `length` over `pieces` (ceil(length / pieces) each, the last shorter), the empty ones left out. */
export function chunkSizes(length: number, pieces: number): number[] {
  const size = Math.ceil(length / pieces);
  const sizes: number[] = [];
  for (let at = 0; at < length; at += size) sizes.push(Math.min(size, length - at));
  return sizes;
}
