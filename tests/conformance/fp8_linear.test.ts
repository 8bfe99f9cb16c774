// FP8 linears against PyTorch's casts (tools/reference/make_fp8_fixtures.py: torchao's row-wise
// float8 recipe on the CPU): nn.quantizeWeightFp8 gives the reference's float8_e4m3fn weight and
// row scales bit for bit, and dt.F.fp8Linear its product (per-token quantized input, float32
// products, the bias) to float32 rounding, on one CPU device and split over two: by output rows
// (column parallel: weight, scales and bias split), by input columns (row parallel: partial sums,
// the row scales whole, each rank's columns quantized with the whole row's amax), and by tokens.
// Bad inputs are DTorchErrors.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError } from '@dtorch/common';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { relativeError } from '../hf/expect_close.js';

const fixtures = readSafetensorsHeader(fileURLToPath(new URL('../fixtures/fp8/fp8_linear.safetensors', import.meta.url)));
const cases = [
  { name: 'f32', tolerance: 1e-6 },
  { name: 'bf16', tolerance: 8e-3 }, // bfloat16 output: one rounding of the float32 product
];
const R = dt.Replicate();
const S = dt.Shard;

describe.each(cases)('fp8 linear, $name', ({ name, tolerance }) => {
  it('quantizes the weight as PyTorch casts it: the same float8 bits and row scales', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const weight = fixtureTensor(fixtures, `${name}.weight`, { mesh });
    const { weight: q, scale } = nn.quantizeWeightFp8(weight);
    expect(q.dtype).toBe('float8_e4m3fn');
    expect(await relativeError(q, fixtureTensor(fixtures, `${name}.weight_q`, { mesh }))).toBe(0);
    expect(await relativeError(scale, fixtureTensor(fixtures, `${name}.weight_scale`, { mesh }))).toBe(0);
    dt.dispose([weight, q, scale]);
  });

  const layouts: { what: string; devices: number; x: dt.Placement; w: dt.Placement; s: dt.Placement; b: dt.Placement }[] = [
    { what: 'one device', devices: 1, x: R, w: R, s: R, b: R },
    { what: 'split by output rows', devices: 2, x: R, w: S(0), s: S(0), b: S(0) },
    { what: 'split by input columns', devices: 2, x: S(-1), w: S(1), s: R, b: dt.Partial() },
    { what: 'split by tokens', devices: 2, x: S(0), w: R, s: R, b: R },
  ];
  it.each(layouts)('multiplies as PyTorch does, $what', async ({ devices, x, w, s, b }) => {
    const mesh = new dt.DeviceMesh('cpu', [...Array(devices).keys()]);
    const t = (key: string, placement: dt.Placement) => fixtureTensor(fixtures, `${name}.${key}`, { mesh, placements: [placement] });
    const input = t('x', x.isShard() ? S(x.dim < 0 ? fixtures.tensors.get(`${name}.x`)!.shape.length - 1 : x.dim) : x);
    const weightQ = t('weight_q', w);
    const scale = t('weight_scale', s);
    const bias = t('bias', R);
    const placedBias = b.isPartial() ? bias.redistribute([dt.Partial()]) : bias.redistribute([b]);
    // split by columns, each rank quantizes its columns with the whole row's amax (nn.rowAmax), as one device does
    const amax = x.isShard() && x.dim !== 0 ? nn.rowAmax([input]) : undefined;
    const y = dt.F.fp8Linear(input, weightQ, scale, placedBias, amax);
    const whole = y.redistribute([R]);
    expect(await relativeError(whole, fixtureTensor(fixtures, `${name}.y`, { mesh }))).toBeLessThanOrEqual(tolerance);
    dt.dispose([input, weightQ, scale, bias, placedBias, y, whole, ...(amax ? [amax] : [])]);
  });
});

describe('fp8 linear refuses bad inputs', () => {
  const mesh = new dt.DeviceMesh('cpu', [0]);
  const x = dt.ones([2, 16], { mesh });
  const q = dt.ones([16, 16], { mesh }).to('float8_e4m3fn');
  const scale = dt.ones([16], { mesh });
  it.each([
    ['a float weight', () => dt.F.fp8Linear(x, dt.ones([16, 16], { mesh }), scale), /float8_e4m3fn or float8_e5m2/],
    ['scales of the wrong size', () => dt.F.fp8Linear(x, q, dt.ones([8], { mesh })), /weightScale must be float32 \[16\]/],
    ['float64 scales', () => dt.F.fp8Linear(x, q, dt.ones([16], { mesh, dtype: 'float64' })), /weightScale must be float32/],
    ['an int input', () => dt.F.fp8Linear(dt.ones([2, 16], { mesh, dtype: 'int32' }), q, scale), /x must be float32, bfloat16 or float16/],
    ['a bias of another dtype', () => dt.F.fp8Linear(x, q, scale, dt.ones([16], { mesh, dtype: 'bfloat16' })), /bias must be float32 \[16\]/],
    ['widths that do not fit', () => dt.F.fp8Linear(dt.ones([2, 8], { mesh }), q, scale), /do not fit/],
    ['a non-float weight to quantize', () => nn.quantizeWeightFp8(dt.ones([4, 4], { mesh, dtype: 'int32' })), /expected a float weight/],
  ])('%s', (_what, call, message) => {
    expect(call).toThrow(DTorchError);
    expect(call).toThrow(message);
  });
});
