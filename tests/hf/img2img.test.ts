// Image-to-image (issue 43): FluxImg2ImgPipeline and StableDiffusion3Img2ImgPipeline on the
// built-in tiny pipelines against diffusers' FluxImg2ImgPipeline / StableDiffusion3Img2ImgPipeline
// (tools/reference/make_img2img_fixtures.py: the same PNGs, the same seeds) on one CPU device and
// on meshes; made from another pipeline's components (fromPipe) and from a saved folder whose
// model_index.json names them; bad inputs refused at the call with nothing left behind.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';
import { caseNamed, commonOptions, expectFixtureCase, expectRefused, type ImageCase } from './pipeline_fixture_case.js';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'tiny-img2img.safetensors'));

interface Case extends ImageCase {
  pipeline: 'flux' | 'sd3';
  image: string[];
  negative_prompt?: string;
  true_cfg_scale?: number;
  num_images_per_prompt?: number;
}
const cases = JSON.parse(readFileSync(join(fixtures, 'tiny-img2img-cases.json'), 'utf8')) as Case[];
const byName = (name: string) => caseNamed(cases, name);
const png = (file: string) => readFileSync(join(fixtures, file));

// the fixture's arguments, camelCase; the pictures as PNG Buffers (the first as a path)
function optionsOf(c: Case): hf.FluxImg2ImgGenerateOptions & hf.SD3Img2ImgGenerateOptions {
  const images = c.image.map((f, i) => (i === 0 ? join(fixtures, f) : png(f)));
  return {
    ...commonOptions(c),
    image: images.length === 1 ? images[0]! : images,
    ...(c.negative_prompt !== undefined ? { negativePrompt: c.negative_prompt } : {}),
    ...(c.true_cfg_scale !== undefined ? { trueCfgScale: c.true_cfg_scale } : {}),
    ...(c.num_images_per_prompt !== undefined ? { numImagesPerPrompt: c.num_images_per_prompt } : {}),
  };
}

const TOLERANCE = 2e-3;

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  cases: string[];
}
const meshes: MeshCase[] = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['flux-one', 'flux-two', 'flux-cfg', 'sd3-one', 'sd3-two'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['flux-one', 'flux-two', 'sd3-one'] },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), cases: ['flux-one'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['flux-one', 'sd3-one'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), cases: ['flux-two', 'flux-cfg', 'sd3-two'] },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), cases: ['flux-cfg', 'sd3-one', 'sd3-two'] },
];

describe.each(meshes)('image to image on $name matches diffusers', ({ name: meshName, make, cases: names }) => {
  let flux: hf.FluxImg2ImgPipeline;
  let sd3: hf.StableDiffusion3Img2ImgPipeline;
  beforeAll(async () => {
    const mesh = make();
    if (names.some((n) => n.startsWith('flux'))) flux = await hf.FluxImg2ImgPipeline.tiny({ mesh });
    if (names.some((n) => n.startsWith('sd3'))) sd3 = await hf.StableDiffusion3Img2ImgPipeline.tiny({ mesh });
  });
  afterAll(() => {
    flux?.dispose();
    sd3?.dispose();
  });

  it.each(names)('%s: latents and images', async (name) => {
    const c = byName(name);
    const pipe = c.pipeline === 'flux' ? flux : sd3;
    expect(pipe.constructor.name).toBe(c.pipeline === 'flux' ? 'FluxImg2ImgPipeline' : 'StableDiffusion3Img2ImgPipeline');
    await expectFixtureCase((o) => pipe.generate(o as never), optionsOf(c), io, name, `${name} on ${meshName}`);
  });
});

describe('image-to-image pipelines', () => {
  let t2i: hf.FluxPipeline;
  beforeAll(async () => {
    t2i = await hf.FluxPipeline.tiny();
  });
  afterAll(() => t2i.dispose());

  it("fromPipe shares the text-to-image pipeline's models; an image given as latents or as a [0, 1] tensor gives diffusers' image", async () => {
    const img2img = hf.FluxImg2ImgPipeline.fromPipe(t2i);
    expect(img2img.transformer).toBe(t2i.transformer);
    expect(img2img.vae).toBe(t2i.vae);
    const c = byName('flux-one');
    const out = await img2img.generate({ ...optionsOf(c), outputType: 'tensor' });
    await expectClose(out.images, fixtureTensor(io, 'flux-one.image'), TOLERANCE, 'fromPipe flux-one');
    // the same picture as a [1, 3, H, W] tensor in [0, 1]
    const pixels = await new hf.VaeImageProcessor({ vaeScaleFactor: 16, doNormalize: false }).preprocess(join(fixtures, c.image[0]!));
    const fromTensor = await img2img.generate({ ...optionsOf(c), image: pixels, outputType: 'tensor' });
    await expectClose(fromTensor.images, fixtureTensor(io, 'flux-one.image'), TOLERANCE, 'flux-one from a tensor');
    // t2i still works, unchanged
    const t2iOut = await t2i.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 1, seed: 0, maxSequenceLength: 8, outputType: 'latent' });
    dt.dispose([out.images, fromTensor.images, pixels, t2iOut.images]);
  });

  it('loads from a folder whose model_index.json names it, and a FluxPipeline folder loads as FluxImg2ImgPipeline', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-img2img-'));
    try {
      await saveTinyPipeline(dir, 'tiny-flux', { text_encoder: t2i.textEncoder!, text_encoder_2: t2i.textEncoder2!, transformer: t2i.transformer, vae: t2i.vae });
      const asImg2Img = await hf.FluxImg2ImgPipeline.fromPretrained(dir);
      expect(asImg2Img).toBeInstanceOf(hf.FluxImg2ImgPipeline);
      asImg2Img.dispose();
      const index = JSON.parse(readFileSync(join(dir, 'model_index.json'), 'utf8')) as Record<string, unknown>;
      writeFileSync(join(dir, 'model_index.json'), JSON.stringify({ ...index, _class_name: 'FluxImg2ImgPipeline' }));
      const auto = await hf.DiffusionPipeline.fromPretrained(dir);
      expect(auto.constructor.name).toBe('FluxImg2ImgPipeline');
      const c = byName('flux-one');
      const out = await (auto as hf.FluxImg2ImgPipeline).generate({ ...optionsOf(c), outputType: 'tensor' });
      await expectClose(out.images, fixtureTensor(io, 'flux-one.image'), TOLERANCE, 'from a saved folder');
      out.images.dispose();
      auto.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses bad inputs at the call with a clear error, and leaves nothing behind', async () => {
    const pipe = hf.FluxImg2ImgPipeline.fromPipe(t2i);
    const c = byName('flux-one');
    const base = optionsOf(c);
    const before = dt.memory().numTensors;
    const refused = (options: object, code: string, ...parts: string[]) => expectRefused(pipe.generate(options as hf.FluxImg2ImgGenerateOptions), code, ...parts);
    await refused({ ...base, image: undefined }, 'INVALID_ARGUMENT', 'FluxImg2ImgPipeline.generate', 'give image');
    await refused({ ...base, strength: 1.5 }, 'INVALID_ARGUMENT', 'strength', '[0, 1]');
    await refused({ ...base, strength: 0 }, 'INVALID_ARGUMENT', 'strength 0 of 5 steps leaves 0 steps');
    await refused({ ...base, image: Buffer.from('not an image at all') }, 'BAD_FILE', 'image');
    await refused({ ...base, prompt: ['a', 'b'], image: [png('img2img-a.png'), png('img2img-b.png'), png('img2img-a.png')] }, 'INVALID_ARGUMENT', '3 images cannot be repeated to a batch of 2');
    const latents = dt.zeros([1, 16, 4, 4]);
    await refused({ ...base, image: latents }, 'SHAPE_MISMATCH', 'latents given as image must be [batch, 16, 8, 8]');
    latents.dispose();
    await refused({ ...base, misspelt: 1 }, 'INVALID_ARGUMENT', 'misspelt');
    await dt.sync();
    expect(dt.memory().numTensors).toBe(before);
  });
});
