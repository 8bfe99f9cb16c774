// float16 safetensors, read and written: a checkpoint PyTorch wrote (tools/reference/make_nn_fixtures.py,
// f16.safetensors: a float16 Linear holding zeros of both signs, the smallest and largest
// subnormals, the smallest normal, values at and near 65504 and infinities) loads as float16 with
// PyTorch's values, exactly (and widened exactly into a float32 module); saveSafetensors writes
// it back as F16 with PyTorch's very bits; and the file it wrote loads back to the same values.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { readSafetensorsHeader, readTensorBytes } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/nn/${name}`, import.meta.url));
const pytorch = readSafetensorsHeader(fixture('f16.safetensors'));
const io = readSafetensorsHeader(fixture('io.safetensors'));
const keys = ['weight', 'bias'] as const;

// PyTorch's float16 values widened to float32 (io.safetensors' f16.*)
const widened = async (key: string) => {
  const t = fixtureTensor(io, `f16.${key}`);
  const values = (await t.data()) as Float32Array;
  t.dispose();
  return values;
};

async function loaded(path: string, dtype: dt.DType): Promise<nn.Linear> {
  const linear = nn.skipInit(() => new nn.Linear(8, 2, { dtype }));
  const result = await linear.loadStateDict(path);
  expect([result.missingKeys, result.unexpectedKeys]).toEqual([[], []]);
  return linear;
}

async function expectPyTorchValues(linear: nn.Linear, dtype: dt.DType): Promise<void> {
  for (const key of keys) {
    const p = linear[key]!;
    expect(p.dtype, key).toBe(dtype);
    // toEqual tells -0 from 0 (Object.is); infinities compare equal to themselves
    expect(Array.from((await p.data()) as Float32Array), key).toEqual(Array.from(await widened(key)));
  }
}

describe('float16 safetensors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dtorch-f16-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the fixture holds the values a float16 reader or writer gets wrong', async () => {
    const w = await widened('weight');
    expect(Object.is(w[1], -0)).toBe(true);
    expect(w[2], 'the smallest subnormal').toBe(2 ** -24);
    expect(w[5], 'the largest subnormal').toBe(1023 * 2 ** -24);
    expect(w[6], 'the smallest normal').toBe(2 ** -14);
    expect([w[8], w[9], w[10]], 'the largest finite values').toEqual([65504, -65504, 65472]);
    expect([w[14], w[15]]).toEqual([Infinity, -Infinity]);
    expect(pytorch.tensors.get('weight')!.dtype).toBe('F16');
  });

  it('loads a float16 checkpoint PyTorch wrote, exactly', async () => {
    const linear = await loaded(fixture('f16.safetensors'), 'float16');
    await expectPyTorchValues(linear, 'float16');
    linear.dispose();
    // widened while loading into a float32 module
    const wide = await loaded(fixture('f16.safetensors'), 'float32');
    await expectPyTorchValues(wide, 'float32');
    wide.dispose();
  });

  it("saves float16 as F16 with PyTorch's bits, and reads its own file back", async () => {
    const linear = await loaded(fixture('f16.safetensors'), 'float16');
    const path = join(dir, 'saved.safetensors');
    await nn.saveSafetensors(path, linear.stateDict());
    const saved = readSafetensorsHeader(path);
    for (const key of keys) {
      expect(saved.tensors.get(key)!.dtype, key).toBe('F16');
      const [ours, theirs] = [readTensorBytes(saved, key), readTensorBytes(pytorch, key)];
      expect(Array.from(new Uint16Array(ours.buffer, ours.byteOffset, ours.length / 2)), `${key}: bits`).toEqual(Array.from(new Uint16Array(theirs.buffer, theirs.byteOffset, theirs.length / 2)));
    }
    linear.dispose();
    const back = await loaded(path, 'float16');
    await expectPyTorchValues(back, 'float16');
    back.dispose();
  });

  it('round-trips float16 values made in DTorch (rounded by the engine, then saved and loaded)', async () => {
    // near 65504 and in the subnormal range, where a wrong exponent bias or rounding shows
    const values = [65504, 65519, -65500, 65488, 2 ** -24, 2 ** -25 * 3, 2 ** -20 + 2 ** -24, 2 ** -14 - 2 ** -24, 6.1e-5, -3.3e-6, 0.1, 1 / 3];
    const half = dt.tensor(values, { dtype: 'float32' }).to('float16');
    const want = (await half.data()) as Float32Array;
    expect(want[1], '65519 rounds to the largest half').toBe(65504);
    expect(want[5], '3 * 2^-25 rounds to 2 * 2^-24 (ties to even)').toBe(2 ** -23);
    const path = join(dir, 'made.safetensors');
    await nn.saveSafetensors(path, { x: half });
    const header = readSafetensorsHeader(path);
    expect(header.tensors.get('x')!.dtype).toBe('F16');
    const back = fixtureTensor(header, 'x');
    expect(back.dtype).toBe('float16');
    expect(Array.from((await back.data()) as Float32Array)).toEqual(Array.from(want));
    dt.dispose([half, back]);
  });
});
