// Images in: decoding against diffusers' load_image (PIL) and VaeImageProcessor against
// diffusers' (tools/reference/make_image_processor_fixtures.py): every file format decodes to
// PIL's bytes (16-bit grey: the high byte, where PIL clips); preprocess equals diffusers' within
// 1e-6 for pictures at the target size and for cropsCoords crops (no resampling); resized, filled
// and cropped pictures (sharp's resampling, not PIL's) and blurred ones (sharp's Gaussian) are
// within a few levels of diffusers' (bounds just above what sharp gives, measured in levels of
// 255, largest and mean: a shifted crop box or a wrong filter fails them); the mask processor
// binarizes as pipeline_flux_inpaint's; getCropRegion and applyOverlay give PIL's pixels (its
// crop region resized: within 2 levels); tensors pass as diffusers passes them; raw RGBA pixels
// and a batch of two; bad images are one DTorchError each, naming what is wrong and what to do.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader, readTensorBytes } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/images/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'images.safetensors'));
const cases = JSON.parse(readFileSync(join(fixtures, 'images.json'), 'utf8')) as {
  cropRegions: { mask: string; width: number; height: number; pad: number; region: number[] }[];
  overlayCrop: [number, number, number, number];
};
const file = (name: string) => join(fixtures, name);
const bytes = (name: string) => readTensorBytes(io, name);
const want = (name: string) => fixtureTensor(io, name);

const processor = new hf.VaeImageProcessor({ vaeScaleFactor: 16 });
// pipeline_flux_inpaint.py's mask_processor
const maskProcessor = new hf.VaeImageProcessor({ vaeScaleFactor: 16, vaeLatentChannels: 16, doNormalize: false, doBinarize: true, doConvertGrayscale: true });
const EXACT = 1e-6;

// Largest and mean |got - want| of 8-bit values (or of tensors in [-1, 1], as levels: x 127.5),
// the shapes checked first. sharp's resampling and blur measured against diffusers' (PIL's):
// resized up to 17 levels (mean 1.7), blurred up to 20 (mean 2.1), so these bounds.
const RESIZED = { max: 20, mean: 2.5 };
const BLURRED = { max: 24, mean: 3 };
async function expectLevels(got: dt.Tensor | Uint8Array, want: dt.Tensor | Uint8Array, bound: { max: number; mean: number }, what: string): Promise<void> {
  const values = async (x: dt.Tensor | Uint8Array) => (x instanceof Uint8Array ? x : Float32Array.from((await x.data()) as Float32Array, (v) => (v + 1) * 127.5));
  if (!(got instanceof Uint8Array) && !(want instanceof Uint8Array)) expect(got.shape, what).toEqual(want.shape);
  const [g, w] = [await values(got), await values(want)];
  expect(g.length, what).toBe(w.length);
  let [max, sum] = [0, 0];
  w.forEach((v, i) => {
    const d = Math.abs(v - g[i]!);
    max = Math.max(max, d);
    sum += d;
  });
  if (process.env.DTORCH_PRINT_ERRORS) console.log(`${what}: largest ${max.toFixed(2)} levels, mean ${(sum / w.length).toFixed(3)}`);
  expect(max, `${what}: largest difference in levels`).toBeLessThanOrEqual(bound.max);
  expect(sum / w.length, `${what}: mean difference in levels`).toBeLessThanOrEqual(bound.mean);
  if (!(want instanceof Uint8Array)) want.dispose();
}

// Rejects with a DTorchError of `code` whose message matches each of `texts`.
async function expectError(promise: Promise<unknown> | (() => unknown), code: string, ...texts: RegExp[]): Promise<void> {
  const error = await (typeof promise === 'function' ? (async () => promise())() : promise).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).name).toBe('DTorchError');
  expect((error as { code: string }).code).toBe(code);
  for (const text of texts) expect((error as Error).message).toMatch(text);
}

describe('decoding pictures as diffusers load_image does', () => {
  const files = ['rgb.png', 'photo.jpg', 'photo.webp', 'rgba.png', 'la.png', 'palette.png', 'g16.png', 'rgb16.png', 'cmyk.jpg', 'mask.png'];
  it.each(files)('%s decodes to PIL\'s RGB bytes, from a path and from a Buffer', async (name) => {
    const expected = bytes(`decoded.${name}`);
    for (const input of [file(name), readFileSync(file(name)), new Uint8Array(readFileSync(file(name)))]) {
      const image = await hf.decodeImage(input);
      expect([image.height, image.width, image.channels]).toEqual([32, 48, 3]);
      expect(Buffer.from(image.data).equals(Buffer.from(expected))).toBe(true);
    }
  });

  it('takes raw RGBA pixels (canvas ImageData) and grey ones, dropping alpha', async () => {
    const rgba = { data: new Uint8ClampedArray(bytes('raw.rgba')), width: 48, height: 32, channels: 4 as const };
    expect(Buffer.from((await hf.decodeImage(rgba)).data).equals(Buffer.from(bytes('decoded.rgba.png')))).toBe(true);
    const grey = await hf.decodeImage({ data: Uint8Array.from([0, 128, 255]), width: 3, height: 1, channels: 1 });
    expect([...grey.data]).toEqual([0, 0, 0, 128, 128, 128, 255, 255, 255]);
  });
});

describe('PNGs out (toPngs, written by sharp) decode to the pixels written', () => {
  it('round(x * 255) of each value, for a batch of two', async () => {
    const images = dt.tensor(Float32Array.from({ length: 2 * 3 * 5 * 7 }, (_, i) => ((i * 37) % 256) / 255 + 0.001), { shape: [2, 3, 5, 7] });
    const pngs = await hf.toPngs(images);
    const values = (await images.data()) as Float32Array;
    for (const [b, png] of pngs.entries()) {
      const decoded = await hf.decodeImage(png);
      expect([decoded.width, decoded.height]).toEqual([7, 5]);
      const expected = Uint8Array.from({ length: 5 * 7 * 3 }, (_, j) => Math.round(values[b * 105 + (j % 3) * 35 + Math.floor(j / 3)]! * 255));
      expect([...decoded.data]).toEqual([...expected]);
    }
    images.dispose();
  });
});

describe('VaeImageProcessor.preprocess against diffusers', () => {
  it('getDefaultHeightWidth rounds down to multiples of vaeScaleFactor', () => {
    expect(processor.getDefaultHeightWidth({ width: 50, height: 37 })).toEqual([32, 48]);
    expect(processor.getDefaultHeightWidth({ width: 50, height: 37 }, 100, 70)).toEqual([96, 64]);
    expect(new hf.VaeImageProcessor().getDefaultHeightWidth({ width: 1023, height: 513 })).toEqual([512, 1016]);
  });

  it.each(['rgb.png', 'photo.jpg', 'rgba.png'])('%s at the target size: [1, 3, 32, 48] in [-1, 1]', async (name) => {
    const x = await processor.preprocess(file(name));
    expect([x.dtype, ...x.shape]).toEqual(['float32', 1, 3, 32, 48]);
    await expectClose(x, want(`preprocess.${name}`), EXACT, name);
    x.dispose();
  });

  it('a batch of two pictures (a PNG path and JPEG bytes)', async () => {
    const x = await processor.preprocess([file('rgb.png'), readFileSync(file('photo.jpg'))]);
    await expectClose(x, want('preprocess.batch'), EXACT, 'batch');
    x.dispose();
  });

  it('raw RGBA pixels give what the RGBA PNG gives', async () => {
    const x = await processor.preprocess({ data: bytes('raw.rgba'), width: 48, height: 32, channels: 4 });
    await expectClose(x, want('preprocess.rgba.png'), EXACT, 'raw RGBA');
    x.dispose();
  });

  it('the inpainting mask processor: grey, binarized to {0, 1}, [1, 1, 32, 48]', async () => {
    for (const name of ['mask.png', 'rgb.png']) {
      const x = await maskProcessor.preprocess(file(name));
      expect(x.shape).toEqual([1, 1, 32, 48]);
      await expectClose(x, want(`mask.${name}`), EXACT, `mask ${name}`);
      x.dispose();
    }
    const grey = await new hf.VaeImageProcessor({ vaeScaleFactor: 16, doNormalize: false, doConvertGrayscale: true }).preprocess(file('rgb.png'));
    await expectClose(grey, want('grey.rgb.png'), EXACT, "PIL's convert('L')");
    grey.dispose();
  });

  it.each([
    ['crop.inside', 'rgb.png', { cropsCoords: [4, 2, 36, 34] }],
    ['crop.edge', 'rgb.png', { cropsCoords: [40, 0, 56, 16] }],
  ] as const)('%s: cropped to the target size (PIL crop, black past the edge), exact', async (key, name, options) => {
    const x = await processor.preprocess(file(name), options as hf.PreprocessOptions);
    await expectClose(x, want(key), EXACT, key);
    x.dispose();
  });

  it.each([
    ['resize.odd', 'odd.png', {}, [32, 48]],
    ['resize.48x64', 'rgb.png', { height: 48, width: 64 }, [48, 64]],
    ['resize.fill.48x48', 'rgb.png', { height: 48, width: 48, resizeMode: 'fill' }, [48, 48]],
    ['resize.fill.32x80', 'rgb.png', { height: 32, width: 80, resizeMode: 'fill' }, [32, 80]],
    ['resize.crop.48x48', 'rgb.png', { height: 48, width: 48, resizeMode: 'crop' }, [48, 48]],
    ['resize.crop.32x80', 'rgb.png', { height: 32, width: 80, resizeMode: 'crop' }, [32, 80]],
  ] as const)('%s: resized by sharp, within a few levels of PIL Lanczos', async (key, name, options, size) => {
    const x = await processor.preprocess(file(name), options as hf.PreprocessOptions);
    expect(x.shape).toEqual([1, 3, ...size]);
    await expectLevels(x, want(key), RESIZED, key);
    x.dispose();
  });

  it('a shifted crop box, the wrong resizeMode or a swapped size fail those bounds', async () => {
    const shifted = await processor.preprocess(file('rgb.png'), { cropsCoords: [5, 2, 37, 34] });
    await expect(expectLevels(shifted, want('crop.inside'), RESIZED, 'shifted crop')).rejects.toThrow(/largest difference/);
    const wrongMode = await processor.preprocess(file('rgb.png'), { height: 48, width: 48, resizeMode: 'crop' });
    await expect(expectLevels(wrongMode, want('resize.fill.48x48'), RESIZED, 'crop for fill')).rejects.toThrow(/largest difference/);
    const swapped = await processor.preprocess(file('rgb.png'), { height: 64, width: 48 });
    await expect(expectLevels(swapped, want('resize.48x64'), RESIZED, 'swapped')).rejects.toThrow(/toStrictEqual|toEqual|expected/);
    for (const t of [shifted, wrongMode, swapped]) t.dispose();
  });

  it('the mask processor resizes before making grey (binarized: a few values of 1536 may flip)', async () => {
    const x = await maskProcessor.preprocess(file('odd.png'));
    expect(x.shape).toEqual([1, 1, 32, 48]);
    const [g, w] = [(await x.data()) as Float32Array, (await want('resize.mask.odd').data()) as Float32Array];
    expect(g.every((v) => v === 0 || v === 1)).toBe(true);
    expect(g.filter((v, i) => v !== w[i]).length).toBeLessThanOrEqual(8); // 3 measured
    x.dispose();
  });

  it('puts the batch on the mesh given, replicated, in the dtype given', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['dp']);
    const x = await processor.preprocess([file('rgb.png'), file('photo.jpg')], {}, mesh, 'bfloat16');
    expect([x.dtype, ...x.shape]).toEqual(['bfloat16', 2, 3, 32, 48]);
    expect(x.mesh).toBe(mesh);
    expect(x.placements.map(String)).toEqual([String(dt.Replicate())]);
    const y = await processor.preprocess(file('rgb.png'), {}, { mesh, dtype: 'float32', name: 'init image' });
    expect([y.dtype, y.mesh === mesh]).toEqual(['float32', true]);
    x.dispose();
    y.dispose();
  });
});

describe('tensor inputs, as diffusers takes them', () => {
  it('a tensor in [0, 1] is scaled to [-1, 1] and resized (nearest) to multiples of vaeScaleFactor', async () => {
    const input = want('tensor.input');
    const x = await processor.preprocess(input);
    expect(x.shape).toEqual([1, 3, 32, 48]);
    await expectClose(x, want('tensor.preprocess'), EXACT, 'tensor');
    expect(input.isDisposed).toBe(false);
    input.dispose();
    x.dispose();
  });

  it('[3, H, W] tensors stack to a batch; latents (vaeLatentChannels) come back as they are', async () => {
    const a = dt.full([3, 32, 48], 0.25);
    const x = await processor.preprocess([a, a]);
    expect(x.shape).toEqual([2, 3, 32, 48]);
    expect(await x.min().item()).toBeCloseTo(-0.5, 6);
    const latents = dt.full([1, 4, 4, 6], 3);
    const same = await processor.preprocess(latents);
    expect(same.shape).toEqual([1, 4, 4, 6]);
    expect(await same.max().item()).toBe(3);
    for (const t of [a, x, latents, same]) t.dispose();
  });

  it('the mask processor binarizes a mask tensor; a [B, H, W] one gains its channel', async () => {
    const values = Float32Array.from({ length: 256 }, (_, i) => i / 256);
    for (const shape of [[1, 1, 16, 16], [1, 16, 16]]) {
      const t = dt.tensor(values, { shape });
      const x = await maskProcessor.preprocess(t);
      expect(x.shape).toEqual([1, 1, 16, 16]);
      expect([...((await x.data()) as Float32Array)]).toEqual(Array.from(values, (v) => (v < 0.5 ? 0 : 1)));
      t.dispose();
      x.dispose();
    }
  });

  it('a tensor already in [-1, 1] is not scaled again (diffusers deprecated form)', async () => {
    const t = dt.full([1, 3, 16, 16], -0.5);
    const x = await processor.preprocess(t);
    expect(await x.min().item()).toBeCloseTo(-0.5, 6);
    t.dispose();
    x.dispose();
  });
});

describe('blur (sharp\'s), getCropRegion and applyOverlay against diffusers', () => {
  it('blur is within a few levels of PIL GaussianBlur (sharp\'s Gaussian, PIL\'s box approximation)', async () => {
    const mask = await hf.VaeImageProcessor.blur(file('mask.png'), 4);
    expect([mask.height, mask.width, mask.channels]).toEqual([32, 48, 3]);
    await expectLevels(mask.data, bytes('blur.mask'), BLURRED, 'blur mask'); // 11 levels measured, mean 2.1
    const rgb = await hf.VaeImageProcessor.blur(readFileSync(file('rgb.png')), 3);
    await expectLevels(rgb.data, bytes('blur.rgb'), BLURRED, 'blur rgb'); // 20 levels measured, mean 0.6
    await expect(expectLevels((await hf.VaeImageProcessor.blur(file('mask.png'), 1)).data, bytes('blur.mask'), BLURRED, 'sigma 1 for 4')).rejects.toThrow();
    const none = await hf.VaeImageProcessor.blur(file('mask.png'), 0);
    expect(Buffer.from(none.data).equals(Buffer.from(bytes('decoded.mask.png')))).toBe(true);
  });

  it.each(cases.cropRegions)('getCropRegion($width, $height, pad $pad) = $region', async ({ mask, width, height, pad, region }) => {
    expect(await hf.VaeImageProcessor.getCropRegion(file(mask), width, height, pad)).toEqual(region);
  });

  it('applyOverlay, whole and into a crop region', async () => {
    const plain = await processor.applyOverlay(file('mask.png'), file('rgb.png'), file('photo.jpg'));
    expect(Buffer.from(plain.data).equals(Buffer.from(bytes('overlay.plain')))).toBe(true);
    // the inpainted picture resized into the crop region by sharp: 2 levels measured, mean 0.08
    const crop = await processor.applyOverlay(file('mask.png'), file('rgb.png'), file('photo.jpg'), cases.overlayCrop);
    await expectLevels(crop.data, bytes('overlay.crop'), { max: 4, mean: 0.2 }, 'overlay crop');
  });
});

describe('bad images: one DTorchError each, saying what is wrong and what to do', () => {
  const png = readFileSync(file('rgb.png'));
  it('bytes that are not an image', async () => {
    await expectError(processor.preprocess(Buffer.from('hello, not a picture')), 'BAD_FILE', /is not an image/, /PNG, JPEG, WebP/, /first bytes are 68656c6c/);
  });
  it('a truncated file', async () => {
    await expectError(processor.preprocess(png.subarray(0, png.length / 2)), 'BAD_FILE', /truncated or corrupt/, /Re-export or re-download/);
    await expectError(hf.decodeImage(readFileSync(file('photo.jpg')).subarray(0, 700)), 'BAD_FILE', /truncated or corrupt/);
  });
  it('zero-sized: empty bytes, raw pixels of no width', async () => {
    await expectError(processor.preprocess(Buffer.alloc(0)), 'INVALID_ARGUMENT', /is empty \(0 bytes\)/);
    await expectError(processor.preprocess({ data: new Uint8Array(0), width: 0, height: 4, channels: 3 }), 'INVALID_ARGUMENT', /hold no pixel/);
  });
  it('a missing file', async () => {
    await expectError(processor.preprocess(file('nope.png')), 'NOT_FOUND', /no file at ".*nope\.png"/);
    await expectError(processor.preprocess(fixtures), 'INVALID_ARGUMENT', /is not a file/);
  });
  it('raw pixels of the wrong length or channel count', async () => {
    await expectError(hf.decodeImage({ data: new Uint8Array(10), width: 2, height: 2, channels: 3 }), 'SHAPE_MISMATCH', /need 12 bytes, but data has 10/);
    await expectError(hf.decodeImage({ data: new Uint8Array(8), width: 2, height: 2, channels: 2 as 1 }), 'INVALID_ARGUMENT', /channels/);
  });
  it('names the bad image of a batch, and refuses what is no image', async () => {
    await expectError(processor.preprocess([png, Buffer.from('nope')]), 'BAD_FILE', /image\[1\]/);
    await expectError(processor.preprocess(42 as unknown as string), 'INVALID_ARGUMENT', /Expected PNG\/JPEG\/WebP bytes/);
    await expectError(processor.preprocess([]), 'INVALID_ARGUMENT', /the batch is empty/);
    await expectError(processor.preprocess(Buffer.from('x'), {}, { name: 'init image' }), 'BAD_FILE', /^init image/);
  });
  it('bad options', async () => {
    await expectError(processor.preprocess(png, { resize_mode: 'fill' } as hf.PreprocessOptions), 'INVALID_ARGUMENT', /did you mean resizeMode/);
    await expectError(processor.preprocess(png, { resizeMode: 'stretch' as 'fill' }), 'INVALID_ARGUMENT', /resizeMode/);
    await expectError(() => new hf.VaeImageProcessor({ doConvertRgb: true, doConvertGrayscale: true }), 'INVALID_ARGUMENT', /cannot both be true/);
    await expectError(hf.VaeImageProcessor.getCropRegion({ data: new Uint8Array(12), width: 2, height: 2, channels: 3 }, 8, 8), 'INVALID_ARGUMENT', /all black/);
  });
});
