// RMS norm over the last dim on GPUs, where DTorch's row kernel serves short rows read through
// any leading strides (per-head q/k norms on a transposed view of a projection): every layout and
// dtype against float32 on the CPU, and the rows the kernel leaves to LibTorch (long, odd) too.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { meshCases } from '../conformance/meshes.js';

const cpu = new dt.DeviceMesh('cpu', [0]);

interface Case {
  name: string;
  dtype: 'float32' | 'bfloat16' | 'float16';
  d: number; // the normalised (last) dim
  weight: boolean;
  // the input from a contiguous float32 draw `base` of shape [tokens, width]
  view: (base: dt.Tensor) => dt.Tensor;
  width: number;
  tokens: number;
}

const heads = (t: dt.Tensor, tokens: number, h: number, d: number) => t.reshape([1, tokens, h, d]).transpose(1, 2); // head-major view
const cases: Case[] = [
  { name: 'q of a fused qkv projection, heads transposed', dtype: 'bfloat16', d: 128, weight: true, width: 3 * 4 * 128, tokens: 33, view: (b) => heads(b.narrow(1, 0, 512), 33, 4, 128) },
  { name: 'k of a fused qkv projection (offset rows)', dtype: 'bfloat16', d: 128, weight: true, width: 3 * 4 * 128, tokens: 33, view: (b) => heads(b.narrow(1, 512, 512), 33, 4, 128) },
  { name: 'contiguous rows, no weight', dtype: 'bfloat16', d: 64, weight: false, width: 64, tokens: 70, view: (b) => b },
  { name: 'float16 head dim 256, transposed', dtype: 'float16', d: 256, weight: true, width: 2 * 256, tokens: 9, view: (b) => heads(b, 9, 2, 256) },
  { name: 'float32 head dim 128, transposed', dtype: 'float32', d: 128, weight: true, width: 3 * 128, tokens: 17, view: (b) => heads(b, 17, 3, 128) },
  { name: 'widest bfloat16 row the kernel serves', dtype: 'bfloat16', d: 1024, weight: true, width: 1024, tokens: 5, view: (b) => b.reshape([5, 1, 1024]) },
  { name: 'row too long for the kernel (LibTorch)', dtype: 'bfloat16', d: 3072, weight: true, width: 3072, tokens: 4, view: (b) => b },
  { name: 'odd row (LibTorch)', dtype: 'bfloat16', d: 12, weight: true, width: 12, tokens: 6, view: (b) => b },
  { name: 'rows not 16-byte aligned (LibTorch)', dtype: 'bfloat16', d: 8, weight: false, width: 4 * 8 + 4, tokens: 6, view: (b) => b.narrow(1, 4, 32).reshape([6, 4, 8]) },
];

// the whole tensor (data() gathers it and widens 16-bit floats), then released
async function values(t: dt.Tensor): Promise<Float32Array> {
  const out = (await t.data()) as Float32Array;
  t.dispose();
  return out;
}

describe('rms norm rows', () => {
  for (const mc of meshCases) {
    it.skipIf(mc.skip !== false)(`equals float32 on the CPU for every layout and dtype: ${mc.name}`, async () => {
      const mesh = mc.make();
      for (const c of cases) {
        const draw = (m: dt.DeviceMesh) => dt.tidy(() => dt.randn([c.tokens, c.width], { seed: 11, mesh: m }).to(c.dtype));
        const weightOn = (m: dt.DeviceMesh) => (c.weight ? dt.tidy(() => dt.rand([c.d], { seed: 12, mesh: m }).add(0.5).to(c.dtype)) : undefined);
        // the reference: the same rounded values, normalised in float32
        const expected = await values(dt.tidy(() => dt.F.rmsNorm(c.view(draw(cpu)).to('float32'), [c.d], { weight: weightOn(cpu)?.to('float32'), eps: 1e-6 })));
        const got = await values(dt.tidy(() => dt.F.rmsNorm(c.view(draw(mesh)), [c.d], { weight: weightOn(mesh), eps: 1e-6 })));
        expect(got.length, c.name).toBe(expected.length);
        // one rounding of a float32 result: half an ulp (2^-8 relative for bfloat16, 2^-11 for float16)
        const relative = { float32: 1e-5, bfloat16: 2 ** -8, float16: 2 ** -11 }[c.dtype];
        const worst = Math.max(...Array.from(got, (g, i) => Math.abs(g - expected[i]!) / Math.max(Math.abs(expected[i]!), 1e-3)));
        expect(worst, c.name).toBeLessThanOrEqual(relative * 1.01);
      }
    });
  }
});
