// Rotary tables from position ids, as diffusers' FluxPosEmbed over get_1d_rotary_pos_embed
// (use_real, repeat_interleave_real): for ids [S, axes], each axis i with axesDim[i] dims gives
// angles pos · theta^(-2j / axesDim[i]) (j < axesDim[i] / 2, in float64), their cos and sin each
// repeated twice in a row (neighbouring pairs rotate together), the axes side by side; float32
// [S, sum(axesDim)]. Each row depends on its own ids only, so ids split over devices by rows
// give tables split the same way. FluxPosEmbed makes the tables of several token streams' ids
// joined as their tokens are (the joint-attention hook's join).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { pieceByPieceJoin, type HasJointAttention, type JointAttention } from '../../parallel/joint_attention.js';

/** The rotary tables [cos, sin], each float32 [S, sum(axesDim)], of position `ids` [S, axes] (diffusers' FluxPosEmbed). */
export function rotaryFromIds(ids: dt.Tensor, axesDim: readonly number[], theta = 10000): [dt.Tensor, dt.Tensor] {
  return dt.tidy(() => {
    const pos = ids.to('float32').to('float64'); // diffusers: ids.float(), then float64 in torch.outer
    const cos: dt.Tensor[] = [];
    const sin: dt.Tensor[] = [];
    axesDim.forEach((dim, i) => {
      const exponent = dt.arange(0, dim, 2, { dtype: 'float64', mesh: ids.mesh }).div(dim);
      const freqs = dt.full([dim / 2], theta, { dtype: 'float64', mesh: ids.mesh }).pow(exponent).reciprocal();
      const angles = pos.narrow(1, i, 1).mul(freqs.unsqueeze(0)); // [S, dim / 2]
      cos.push(angles.cos().repeatInterleave(2, 1).to('float32'));
      sin.push(angles.sin().repeatInterleave(2, 1).to('float32'));
    });
    return [dt.cat(cos, -1), dt.cat(sin, -1)] as [dt.Tensor, dt.Tensor];
  });
}

/**
 * diffusers' FluxPosEmbed: the rotary tables [cos, sin] of the position ids of each token stream
 * (Flux: text, then image), joined into one sequence as the streams' tokens are. No weights.
 */
export class FluxPosEmbed extends nn.Module implements HasJointAttention {
  /** Rotary dims per position axis (the config's axes_dims_rope). */
  readonly axesDim: readonly number[];
  /** How the streams' ids join (the context-parallel plan's hook; piece by piece by default). */
  jointAttention: JointAttention = pieceByPieceJoin;

  constructor(axesDim: readonly number[]) {
    super();
    this.axesDim = axesDim;
  }

  /** The tables of `ids`, each stream's [S_i, axes], joined along their tokens. */
  forward(...ids: dt.Tensor[]): [dt.Tensor, dt.Tensor] {
    return rotaryFromIds(this.jointAttention.join(ids, 0), this.axesDim);
  }
}

/**
 * The rotary tables of the ids a model was last called with. A denoising loop passes the same
 * ids tensors every step (two sets, alternating, under classifier-free guidance without batching),
 * and their tables (some 40 small kernels each, from float64 angles) come out the same each time:
 * they are made once and kept for the last kEntries sets of ids, until dispose(). The ids are held
 * weakly (a program that lets them go still frees them).
 */
export class RotaryTableCache {
  static readonly kEntries = 2;
  #entries: { ids: WeakRef<dt.Tensor>[]; tables: [dt.Tensor, dt.Tensor] }[] = [];

  /** The tables of `ids` (the tensors they are computed from): those kept from a call with these very tensors, else `compute()`'s, kept. */
  tables(ids: readonly dt.Tensor[], compute: () => [dt.Tensor, dt.Tensor]): [dt.Tensor, dt.Tensor] {
    const same = (e: { ids: WeakRef<dt.Tensor>[] }) => e.ids.length === ids.length && ids.every((t, i) => e.ids[i]!.deref() === t && !t.isDisposed);
    const found = this.#entries.findIndex(same);
    if (found >= 0) {
      const [entry] = this.#entries.splice(found, 1);
      this.#entries.push(entry!); // the most recent last
      return entry!.tables;
    }
    const tables = compute();
    this.#entries.push({ ids: ids.map((t) => new WeakRef(t)), tables: [dt.keep(tables[0]), dt.keep(tables[1])] });
    while (this.#entries.length > RotaryTableCache.kEntries) dt.dispose(this.#entries.shift()!.tables);
    return tables;
  }

  /** Frees the tables kept. */
  dispose(): void {
    for (const e of this.#entries) dt.dispose(e.tables);
    this.#entries = [];
  }
}
