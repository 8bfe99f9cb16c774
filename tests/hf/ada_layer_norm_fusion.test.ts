// The adaLN norms' modulation norm(x)·(1 + scale) + shift releases the norm's output and the
// product at once, so the controller fuses the layer norm, the mul and the add into one
// layer_norm_addcmul even when the segment ends before the block that called it does
// (models/normalization/ada_layer_norm.ts: modulatedNorm), with 1 + scale folded in
// (layer_norm_modulate). Here a step boundary (dt.graph.step)
// ends the segment right after the norm, inside a tidy that outlives it: the same ops written
// inline keep their intermediates to the tidy's end and run three kernels more. The values are the
// same bits (CPU workers run the fused ops one after another).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const mesh = new dt.DeviceMesh('cpu', [0]);
const kernelsRun = () => dt.workers().reduce((n, w) => n + w.kernelsRun, 0);

// Kernels run by `f` (recorded in a step inside a tidy the step ends before) and its value.
async function run(f: () => dt.Tensor): Promise<{ kernels: number; value: Float32Array }> {
  await dt.sync();
  const start = kernelsRun();
  const out = dt.tidy(() => dt.keep(dt.graph.step(f)));
  await dt.sync();
  const kernels = kernelsRun() - start;
  const value = (await out.data()) as Float32Array;
  out.dispose();
  return { kernels, value };
}

describe('adaLN modulation', () => {
  it('fuses its norm, mul and add when the segment ends before the caller does', async () => {
    const norm = new hf.AdaLayerNormZeroSingle(16, { mesh });
    const x = dt.randn([2, 5, 16], { seed: 1, mesh });
    const emb = dt.randn([2, 16], { seed: 2, mesh });
    const ours = await run(() => norm.forward(x, emb)[0]);
    const inline = await run(() => {
      const [shift, scale] = norm.linear.forward(dt.F.silu(emb)).chunk(3, 1) as [dt.Tensor, dt.Tensor, dt.Tensor];
      return norm.norm.forward(x).mul(scale.add(1).unsqueeze(1)).add(shift.unsqueeze(1));
    });
    // the norm, the mul, the add and 1 + scale in one kernel (layer_norm_modulate)
    expect(ours.kernels).toBe(inline.kernels - 3);
    expect(ours.value).toEqual(inline.value);
    dt.dispose([x, emb]);
    norm.dispose();
  });
});
