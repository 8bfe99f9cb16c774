// Inpainting (issue 43): FluxInpaintPipeline and StableDiffusion3InpaintPipeline on the built-in
// tiny pipelines against diffusers' FluxInpaintPipeline / StableDiffusion3InpaintPipeline
// (tools/reference/make_inpaint_fixtures.py: the same PNGs and masks, the same seeds) on one CPU
// device and on meshes; paddingMaskCrop's paste-back keeps the picture outside the mask to the
// byte; bad inputs refused at the call with nothing left behind.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { caseNamed, commonOptions, expectFixtureCase, expectRefused, type ImageCase } from './pipeline_fixture_case.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'tiny-inpaint.safetensors'));

interface Case extends ImageCase {
  pipeline: 'flux' | 'sd3';
  image: string[];
  mask_image: string[];
}
const cases = JSON.parse(readFileSync(join(fixtures, 'tiny-inpaint-cases.json'), 'utf8')) as Case[];
const byName = (name: string) => caseNamed(cases, name);
const file = (f: string) => join(fixtures, f);
const one = <T>(list: T[]) => (list.length === 1 ? list[0]! : list);

function optionsOf(c: Case): hf.FluxInpaintGenerateOptions & hf.SD3InpaintGenerateOptions {
  return { ...commonOptions(c), image: one(c.image.map(file)), maskImage: one(c.mask_image.map((f) => readFileSync(file(f)))) };
}

const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['flux-inpaint-one', 'flux-inpaint-two', 'sd3-inpaint-one', 'sd3-inpaint-two'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['flux-inpaint-one', 'sd3-inpaint-one'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['flux-inpaint-one'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), cases: ['flux-inpaint-two', 'sd3-inpaint-two'] },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), cases: ['sd3-inpaint-one', 'sd3-inpaint-two'] },
];

describe.each(meshes)('inpainting on $name matches diffusers', ({ name: meshName, make, cases: names }) => {
  let flux: hf.FluxInpaintPipeline;
  let sd3: hf.StableDiffusion3InpaintPipeline;
  beforeAll(async () => {
    const mesh = make();
    if (names.some((n) => n.startsWith('flux'))) flux = await hf.FluxInpaintPipeline.tiny({ mesh });
    if (names.some((n) => n.startsWith('sd3'))) sd3 = await hf.StableDiffusion3InpaintPipeline.tiny({ mesh });
  });
  afterAll(() => {
    flux?.dispose();
    sd3?.dispose();
  });

  it.each(names)('%s: latents and images', async (name) => {
    const c = byName(name);
    const pipe = c.pipeline === 'flux' ? flux : sd3;
    await expectFixtureCase((o) => pipe.generate(o as never), optionsOf(c), io, name, `${name} on ${meshName}`);
  });
});

describe('inpainting pipelines', () => {
  let pipe: hf.FluxInpaintPipeline;
  beforeAll(async () => {
    pipe = hf.FluxInpaintPipeline.fromPipe(await hf.FluxPipeline.tiny());
  });
  afterAll(() => pipe.dispose());

  it('with paddingMaskCrop works on the mask\'s box and pastes the PNG back: outside the mask the picture is unchanged', async () => {
    const c = byName('flux-inpaint-one');
    const { images } = await pipe.generate({ ...optionsOf(c), paddingMaskCrop: 4, outputType: 'png' });
    const [out, picture, mask] = await Promise.all([images[0]!, file(c.image[0]!), file(c.mask_image[0]!)].map((p) => sharp(p).raw().toBuffer({ resolveWithObject: true })));
    expect([out!.info.width, out!.info.height]).toEqual([64, 64]);
    let changed = 0;
    for (let i = 0; i < 64 * 64; i++) {
      const inside = mask!.data[i * mask!.info.channels]! > 127;
      for (let k = 0; k < 3; k++) {
        const [a, b] = [out!.data[i * 3 + k]!, picture!.data[i * 3 + k]!];
        if (!inside) expect(a, `pixel ${i} outside the mask`).toBe(b);
        else if (a !== b) changed++;
      }
    }
    expect(changed, 'inside the mask the picture is redrawn').toBeGreaterThan(100);
  });

  it('refuses bad inputs at the call with a clear error, and leaves nothing behind', async () => {
    const base = optionsOf(byName('flux-inpaint-one'));
    const before = dt.memory().numTensors;
    const refused = (options: object, code: string, ...parts: string[]) => expectRefused(pipe.generate(options as hf.FluxInpaintGenerateOptions), code, ...parts);
    await refused({ ...base, maskImage: undefined }, 'INVALID_ARGUMENT', 'give maskImage');
    await refused({ ...base, paddingMaskCrop: -1 }, 'INVALID_ARGUMENT', 'paddingMaskCrop');
    await refused({ ...base, paddingMaskCrop: 4, outputType: 'tensor' }, 'INVALID_ARGUMENT', "'png' with paddingMaskCrop");
    await refused({ ...base, maskImage: Buffer.from('no') }, 'BAD_FILE', 'maskImage');
    await refused({ ...base, maskImage: [file('inpaint-mask-a.png'), file('inpaint-mask-b.png'), file('inpaint-mask-a.png')] }, 'INVALID_ARGUMENT', 'FluxInpaintPipeline.generate', 'mask');
    await dt.sync();
    expect(dt.memory().numTensors).toBe(before);
  });
});
