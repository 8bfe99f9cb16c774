// DTORCH_CONV_CHANNELS_LAST=1: 16-bit convolutions on GPUs read and write channels last, and what
// reads their output takes that layout (DTorch's group norm kernels, LibTorch's ops). A VAE
// resnet block (conv, group norm, SiLU, conv, residual) and its group norms equal the same on a
// CPU device in float32 within bfloat16 rounding, for the channel counts of the SD3/Flux VAE
// (128, 256 and 512 channels in 32 groups: 4, 8 and 16 channels a group). On CPUs the switch
// changes nothing (the same ops run); the GPU cases run on the device machine.
import './conv_channels_last_on.js';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';
import { groupNormReference, relativeL2 } from './float_reference.js';

const cpu = new dt.DeviceMesh('cpu', [0]);

// float32 values drawn on the CPU device, as a tensor of `dtype` on `mesh` (the same values on every mesh)
async function drawn(shape: number[], seed: number, mesh: dt.DeviceMesh, dtype: dt.DType, scale = 1, shift = 0): Promise<dt.Tensor> {
  const values = dt.tidy(() => dt.randn(shape, { seed, mesh: cpu }).mul(scale).add(shift).to(dtype).to('float32'));
  const data = (await values.data()) as Float32Array;
  values.dispose();
  return dt.tensor(data, { shape, mesh, dtype });
}

// x + conv2(silu(norm2(conv1(silu(norm1(x)))))) as the VAE's ResnetBlock2D computes it
function resnetBlock(x: dt.Tensor, p: Record<string, dt.Tensor>): dt.Tensor {
  return dt.tidy(() => {
    let h = dt.F.silu(dt.F.groupNorm(x, 32, { weight: p['n1w'], bias: p['n1b'], eps: 1e-6 }));
    h = dt.F.conv2d(h, p['c1w']!, p['c1b'], { padding: 1 });
    h = dt.F.silu(dt.F.groupNorm(h, 32, { weight: p['n2w'], bias: p['n2b'], eps: 1e-6 }));
    return x.add(dt.F.conv2d(h, p['c2w']!, p['c2b'], { padding: 1 }));
  });
}

describe('channels-last convolutions (DTORCH_CONV_CHANNELS_LAST=1)', () => {
  it('is on in this file', () => {
    expect(dt.nativeSettings().convChannelsLast).toBe(true);
  });

  for (const mc of meshCases.filter((m) => m.devices === 1)) {
    it.skipIf(mc.skip !== false)(`a VAE resnet block and its group norms equal float32 on a CPU: ${mc.name}`, async () => {
      const mesh = mc.make();
      const dtype = mesh.deviceType === 'cuda' ? 'bfloat16' : 'float32';
      for (const [c, side] of [
        [128, 32],
        [256, 16],
        [512, 16],
      ] as const) {
        const names = ['n1w', 'n1b', 'c1w', 'c1b', 'n2w', 'n2b', 'c2w', 'c2b'];
        const shapes = [[c], [c], [c, c, 3, 3], [c], [c], [c], [c, c, 3, 3], [c]];
        const scales = [1, 1, 1 / Math.sqrt(9 * c), 0.1, 1, 1, 1 / Math.sqrt(9 * c), 0.1];
        const on = async (m: dt.DeviceMesh, t: dt.DType) => {
          const params: Record<string, dt.Tensor> = {};
          for (let i = 0; i < names.length; i++) params[names[i]!] = await drawn(shapes[i]!, 70 + i, m, t, scales[i], i % 4 === 0 ? 1 : 0);
          return { x: await drawn([2, c, side, side], 69, m, t, 2, 1), params };
        };
        const here = await on(mesh, dtype);
        const there = await on(cpu, 'float32');
        const got = resnetBlock(here.x, here.params);
        const expected = resnetBlock(there.x, there.params);
        const [g, e] = (await Promise.all([got.to('float32').data(), expected.data()])) as Float32Array[];
        expect(relativeL2(g!, e!), `${c} channels`).toBeLessThanOrEqual(dtype === 'bfloat16' ? 1e-2 : 1e-6);
        // the group norm of a convolution's output (channels last on GPUs), with and without the SiLU, against float64
        const conv = dt.F.conv2d(here.x, here.params['c1w']!, here.params['c1b'], { padding: 1 });
        const convValues = (await conv.to('float32').data()) as Float32Array;
        const [w, b] = (await Promise.all([here.params['n2w']!.to('float32').data(), here.params['n2b']!.to('float32').data()])) as Float32Array[];
        for (const silu of [false, true]) {
          const normed = dt.tidy(() => {
            const n = dt.F.groupNorm(conv, 32, { weight: here.params['n2w'], bias: here.params['n2b'], eps: 1e-6 });
            return silu ? dt.F.silu(n) : n;
          });
          const reference = groupNormReference(convValues, [2, c, side * side], 32, 1e-6, w, b, silu);
          expect(relativeL2((await normed.to('float32').data()) as Float32Array, reference), `${c} channels, silu ${silu}`).toBeLessThanOrEqual(
            dtype === 'bfloat16' ? 4e-3 : 1e-5,
          );
          normed.dispose();
        }
        dt.dispose([got, expected, conv, here.x, there.x, ...Object.values(here.params), ...Object.values(there.params)]);
      }
    });
  }
});
