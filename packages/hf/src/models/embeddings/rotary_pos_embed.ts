// Rotary tables from position ids, as diffusers' FluxPosEmbed over get_1d_rotary_pos_embed
// (use_real, repeat_interleave_real): for ids [S, axes], each axis i with axesDim[i] dims gives
// angles pos · theta^(-2j / axesDim[i]) (j < axesDim[i] / 2, in float64), their cos and sin each
// repeated twice in a row (neighbouring pairs rotate together), the axes side by side; float32
// [S, sum(axesDim)]. Each row depends on its own ids only, so ids split over devices by rows
// give tables split the same way.
import * as dt from '@dtorch/api';

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
