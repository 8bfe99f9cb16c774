// The composite ops against PyTorch, from tests/fixtures/composite_ops.safetensors (written by
// tools/reference/make_composite_fixtures.py), on every mesh kind present: gelu tanh, rms norm
// (float32 and bfloat16), group norm, conv2d with padding and groups, bilinear interpolate, sdpa
// with a mask and causal, applyRotaryEmb (both pairings; bfloat16 through a transposed view and
// over [B, S, H, D] with sequenceDim 1, as Flux rotates, DTorch's one-pass kernel on GPUs). float32 <= 1e-5 relative (absolute
// below 1; measured: sdpa 6e-8, the rest bit-exact); bfloat16 bit-exact on CPU (measured), and on
// CUDA, where DTorch's own row kernel computes the rms norm in one rounding, <= 1e-2 (rotary:
// bit-exact there too).
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { meshCases } from './meshes.js';

const header = readSafetensorsHeader(fileURLToPath(new URL('../fixtures/composite_ops.safetensors', import.meta.url)));
const load = (name: string, mesh: dt.DeviceMesh) => fixtureTensor(header, name, { mesh });

type Attrs = Record<string, unknown>;
const ops: Record<string, (x: dt.Tensor[], a: Attrs) => dt.Tensor> = {
  gelu: ([x], a) => dt.F.gelu(x!, { approximate: a['approximate'] as 'tanh' }),
  rmsNorm: ([x, w], a) => dt.F.rmsNorm(x!, a['shape'] as number[], { weight: w, eps: a['eps'] as number }),
  groupNorm: ([x, w, b], a) => dt.F.groupNorm(x!, a['groups'] as number, { weight: w, bias: b, eps: a['eps'] as number }),
  conv2d: ([x, w, b], a) => dt.F.conv2d(x!, w!, b, { padding: a['padding'] as [number, number], groups: a['groups'] as number }),
  interpolate: ([x], a) => dt.F.interpolate(x!, { size: a['size'] as [number, number], mode: a['mode'] as 'bilinear' }),
  sdpa: ([q, k, v, m], a) => dt.F.scaledDotProductAttention(q!, k!, v!, { attnMask: m, isCausal: a['causal'] as boolean }),
  // with transpose, x is stored [B, S, H, D] and rotated as its [B, H, S, D] view (Flux's layout)
  // with sequenceDim, x [B, S, H, D] is rotated where it lies (diffusers' sequence_dim=1)
  rotary: ([x, c, s], a) =>
    dt.F.applyRotaryEmb(a['transpose'] ? x!.transpose(1, 2) : x!, [c!, s!], { useRealUnbindDim: a['unbind'] as -1, sequenceDim: a['sequenceDim'] as number | undefined }),
};

const cases = Object.entries(header.metadata)
  .filter(([name]) => name !== 'torch')
  .map(([name, json]) => ({ name, ...(JSON.parse(json) as { op: string; attrs: Attrs; inputs: number }) }));

describe.each(meshCases)('composite ops on $name', ({ make, skip }) => {
  it.skipIf(skip)(`match PyTorch (${cases.length} cases)`, async () => {
    expect(cases.length).toBeGreaterThanOrEqual(10);
    const mesh = make();
    for (const c of cases) {
      const inputs = Array.from({ length: c.inputs }, (_, i) => load(`${c.name}.in${i}`, mesh));
      const out = ops[c.op]!(inputs, c.attrs);
      const expected = load(`${c.name}.out`, mesh);
      expect(out.shape, c.name).toEqual(expected.shape);
      expect(out.dtype, c.name).toBe(expected.dtype);
      const [got, want] = [(await out.data()) as Float32Array, (await expected.data()) as Float32Array];
      expect(got.length, c.name).toBe(want.length);
      // rotary rounds as PyTorch does on every device: exact in bfloat16 on CUDA too
      const tolerance = out.dtype === 'bfloat16' ? (mesh.deviceType === 'cuda' && c.op !== 'rotary' ? 1e-2 : 0) : 1e-5;
      if (tolerance === 0) expect(Array.from(got), c.name).toEqual(Array.from(want));
      else got.forEach((v, i) => expect(Math.abs(v - want[i]!), `${c.name} at ${i}`).toBeLessThanOrEqual(tolerance * Math.max(1, Math.abs(want[i]!))));
      dt.dispose([inputs, out, expected]);
    }
  });
});
