// Patch-parallel AutoencoderKL (xDiT's DistVAE): decode and encode with the image's rows split
// over CPU meshes of 2 and 3 devices equal one device within float rounding (1e-5 of the
// largest value), for latent heights that do not divide evenly (7 over 3: 3, 3, 1 rows), fewer
// latent rows than devices, image heights that are not multiples of the VAE's scale factor, the
// VAE with quant convs (3 levels) and without (16 latent channels); rows over 'ulysses' with the
// batch over 'dp' at once; a 'cfg' dim that splits nothing runs nothing; bfloat16 within 1e-2
// (equal on CPU); tiny-flux on ulysses=2 decodes row-split and gives one device's images; bad
// dim choices are DTorchErrors that name the mesh's dims.
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { relativeError } from './expect_close.js';
import { errorOf } from './error_of.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const one = () => new dt.DeviceMesh('cpu', [0]);
const TOLERANCE = 1e-5;

// the same draw on any mesh (the full tensor of a seed does not depend on the mesh)
const draw = (shape: number[], mesh: dt.DeviceMesh, seed: number) => dt.randn(shape, { mesh, seed });

const meshes = [
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), dims: 'ulysses' },
  { name: 'tp=3', make: () => new dt.DeviceMesh('cpu', [0, 1, 2], ['tp']), dims: 'tp' },
];

describe.each(meshes)('AutoencoderKL split by rows over $name equals one device', ({ make, dims }) => {
  it.each([
    ['autoencoder_kl', 7, 6],
    ['autoencoder_kl', 2, 5],
    ['autoencoder_kl-16ch', 5, 4],
  ])('%s: decode of %i x %i latents', async (name, height, width) => {
    const before = dt.memory().numTensors;
    const single = await hf.AutoencoderKL.fromPretrained(folder(name), { mesh: one() });
    const split = (await hf.AutoencoderKL.fromPretrained(folder(name), { mesh: make() })).enablePatchParallel(dims);
    const channels = single.config.latentChannels;
    const [z1, zn] = [draw([1, channels, height, width], single.mesh, 11), draw([1, channels, height, width], split.mesh, 11)];
    const decoderForward = vi.spyOn(split.decoder, 'forward');
    const [want, got] = [single.decode(z1), split.decode(zn)];
    expect(decoderForward, 'the split path, not the whole decoder').not.toHaveBeenCalled();
    expect(got.placements.map(String)).toEqual(['R']);
    expect(await relativeError(got, want)).toBeLessThanOrEqual(TOLERANCE);
    // the per-call option turns it off for one call
    const unsplit = split.decode(zn, { patchParallel: false });
    expect(decoderForward).toHaveBeenCalledTimes(1);
    expect(await relativeError(unsplit, want)).toBeLessThanOrEqual(TOLERANCE);
    dt.dispose([z1, zn, want, got, unsplit]);
    single.dispose();
    split.dispose();
    expect(dt.memory().numTensors, 'every tensor released').toBeLessThanOrEqual(before);
  });

  // 56 rows: 7 latent rows of 8 (3, 3, 1 over 3); 30 rows: not a multiple of 8 (the last piece takes the rest); 12: one latent row
  it.each([
    ['autoencoder_kl', 56, 24],
    ['autoencoder_kl', 30, 16],
    ['autoencoder_kl', 12, 16],
    ['autoencoder_kl-16ch', 22, 8],
  ])('%s: encode of %i x %i images (mean and logvar)', async (name, height, width) => {
    const before = dt.memory().numTensors;
    const single = await hf.AutoencoderKL.fromPretrained(folder(name), { mesh: one() });
    const split = await hf.AutoencoderKL.fromPretrained(folder(name), { mesh: make() });
    const [x1, xn] = [draw([1, 3, height, width], single.mesh, 5), draw([1, 3, height, width], split.mesh, 5)];
    const encoderForward = vi.spyOn(split.encoder, 'forward');
    const want = single.encode(x1);
    const got = split.encode(xn, { patchParallel: [dims] });
    expect(encoderForward).not.toHaveBeenCalled();
    expect(await relativeError(got.mean, want.mean)).toBeLessThanOrEqual(TOLERANCE);
    expect(await relativeError(got.logvar, want.logvar)).toBeLessThanOrEqual(TOLERANCE);
    dt.dispose([x1, xn, want, got]);
    single.dispose();
    split.dispose();
    expect(dt.memory().numTensors, 'every tensor released').toBeLessThanOrEqual(before);
  });
});

describe('AutoencoderKL split by rows and by batch at once', () => {
  it("dp=2 x ulysses=2: the batch over 'dp', the rows over 'ulysses'; a batch dp cannot split goes by rows over both", async () => {
    const single = await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl'), { mesh: one() });
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']);
    const split = (await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl'), { mesh })).enablePatchParallel();
    for (const batch of [2, 3]) {
      const [z1, zn] = [draw([batch, 4, 5, 4], single.mesh, 3), draw([batch, 4, 5, 4], mesh, 3)];
      const [want, got] = [single.decode(z1), split.decode(zn)];
      expect(got.placements.map(String), `batch ${batch}`).toEqual(batch === 2 ? ['S(0)', 'R'] : ['R', 'R']);
      expect(await relativeError(got, want), `batch ${batch}`).toBeLessThanOrEqual(TOLERANCE);
      dt.dispose([z1, zn, want, got]);
    }
    single.dispose();
    split.dispose();
  });
});

describe('AutoencoderKL split by rows, more cases', () => {
  it("cfg=2 x ulysses=2 with rows over 'ulysses' only: the cfg dim does not repeat the work, every device gets the images", async () => {
    const single = await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl-16ch'), { mesh: one() });
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'ulysses']);
    const split = (await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl-16ch'), { mesh })).enablePatchParallel(['ulysses']);
    const [z1, zn] = [draw([1, 16, 3, 5], single.mesh, 8), draw([1, 16, 3, 5], mesh, 8)];
    const toLocal = vi.spyOn(dt.Tensor.prototype, 'toLocal');
    const [want, got] = [single.decode(z1), split.decode(zn)];
    // only ranks 0 and 1 (cfg 0) take their rows: the input once each, then the weights
    expect(new Set(toLocal.mock.calls.map(([rank]) => rank))).toEqual(new Set([0, 1]));
    toLocal.mockRestore();
    expect(got.placements.map(String)).toEqual(['R', 'R']);
    expect(await relativeError(got, want)).toBeLessThanOrEqual(TOLERANCE);
    dt.dispose([z1, zn, want, got]);
    single.dispose();
    split.dispose();
  });

  it('bfloat16: decode and encode on tp=3 within bfloat16 rounding of one device (the statistics in float32)', async () => {
    const single = await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl-16ch'), { mesh: one(), dtype: 'bfloat16' });
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2], ['tp']);
    const split = (await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl-16ch'), { mesh, dtype: 'bfloat16' })).enablePatchParallel('tp');
    const [z1, zn] = [dt.tidy(() => draw([1, 16, 7, 4], single.mesh, 2).to('bfloat16')), dt.tidy(() => draw([1, 16, 7, 4], mesh, 2).to('bfloat16'))];
    const [want, got] = [single.decode(z1), split.decode(zn)];
    expect(got.dtype).toBe('bfloat16');
    const [x1, xn] = [dt.tidy(() => draw([1, 3, 26, 8], single.mesh, 4).to('bfloat16')), dt.tidy(() => draw([1, 3, 26, 8], mesh, 4).to('bfloat16'))];
    const [wantMean, gotMean] = [single.encode(x1), split.encode(xn)];
    const widened = dt.tidy(() => [want, got, wantMean.mean, gotMean.mean].map((t) => t.to('float32')));
    const [decodeError, encodeError] = [await relativeError(widened[1]!, widened[0]!), await relativeError(widened[3]!, widened[2]!)];
    if (process.env.DTORCH_PRINT_ERRORS) console.log(`bf16 decode ${decodeError.toExponential(2)}, encode ${encodeError.toExponential(2)}`);
    expect(decodeError).toBeLessThanOrEqual(1e-2);
    expect(encodeError).toBeLessThanOrEqual(1e-2);
    dt.dispose([z1, zn, want, got, x1, xn, wantMean, gotMean, widened]);
    single.dispose();
    split.dispose();
  });
});

describe('FluxPipeline decodes split by rows', () => {
  it('tiny-flux on ulysses=2 decodes row-split (the whole decoder never runs) and gives one device\'s images', async () => {
    const options = { prompt: 'a red circle', height: 48, width: 32, numInferenceSteps: 2, seed: 1, maxSequenceLength: 16, outputType: 'tensor' as const };
    const single = await hf.FluxPipeline.tiny();
    const { images: want } = await single.generate(options);
    single.dispose();
    const pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) });
    const decoderForward = vi.spyOn(pipe.vae.decoder, 'forward');
    const { images: got } = await pipe.generate(options);
    expect(decoderForward).not.toHaveBeenCalled();
    expect(await relativeError(got, want)).toBeLessThanOrEqual(1e-4);
    // disablePatchParallel: the pipeline decodes unsplit
    pipe.vae.disablePatchParallel();
    const { images: unsplit } = await pipe.generate(options);
    expect(decoderForward).toHaveBeenCalledTimes(1);
    expect(await relativeError(unsplit, want)).toBeLessThanOrEqual(1e-4);
    dt.dispose([want, got, unsplit]);
    pipe.dispose();
  });
});

describe('patch-parallel bad input', () => {
  it('a dim the mesh lacks is INVALID_MESH naming its dims; a choice of the wrong type is INVALID_ARGUMENT', async () => {
    const vae = await hf.AutoencoderKL.fromPretrained(folder('autoencoder_kl'), { mesh: new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) });
    const unknown = errorOf(() => vae.enablePatchParallel('sp'));
    expect(unknown).toBeInstanceOf(dt.DTorchError);
    expect(unknown.code).toBe('INVALID_MESH');
    expect(unknown.message).toContain("AutoencoderKL.enablePatchParallel dims: 'sp' is not a dim of the VAE's mesh");
    expect(unknown.message).toContain("its dims are 'ulysses'");
    expect(vae.patchParallel, 'a failed call changes nothing').toBeUndefined();
    const z = dt.zeros([1, 4, 4, 4], { mesh: vae.mesh });
    const wrongType = errorOf(() => vae.decode(z, { patchParallel: 2 as never }));
    expect(wrongType.code).toBe('INVALID_ARGUMENT');
    expect(wrongType.message).toContain('AutoencoderKL.decode patchParallel must be true, false, a mesh dim name or a list of them, got 2');
    z.dispose();
    vae.dispose();
  });
});
