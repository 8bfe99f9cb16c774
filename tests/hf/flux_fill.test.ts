// FLUX.1-Fill (issue 43): FluxFillPipeline on the built-in tiny-flux-fill (tiny-flux with a Fill
// transformer) against diffusers' FluxFillPipeline (tools/reference/make_fill_fixtures.py: the
// same PNGs and masks, the same seeds) on one CPU device and on meshes; loaded by _class_name;
// bad inputs refused at the call.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { caseNamed, commonOptions, expectFixtureCase, expectRefused, type ImageCase } from './pipeline_fixture_case.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'tiny-fill.safetensors'));

interface Case extends ImageCase {
  image: string[];
  mask_image: string[];
}
const cases = JSON.parse(readFileSync(join(fixtures, 'tiny-fill-cases.json'), 'utf8')) as Case[];
const byName = (name: string) => caseNamed(cases, name);
const file = (f: string) => join(fixtures, f);
const one = <T>(list: T[]) => (list.length === 1 ? list[0]! : list);

function optionsOf(c: Case): hf.FluxFillGenerateOptions {
  return { ...commonOptions(c), image: one(c.image.map(file)), maskImage: one(c.mask_image.map(file)) };
}

const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['fill-one', 'fill-two'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['fill-one', 'fill-two'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['fill-one'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), cases: ['fill-two'] },
];

describe.each(meshes)('FLUX.1-Fill on $name matches diffusers', ({ name: meshName, make, cases: names }) => {
  let pipe: hf.FluxFillPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxFillPipeline.tiny({ mesh: make() });
  });
  afterAll(() => pipe.dispose());

  it.each(names)('%s: latents and images', async (name) => {
    const c = byName(name);
    await expectFixtureCase((o) => pipe.generate(o as never), optionsOf(c), io, name, `${name} on ${meshName}`);
  });
});

describe('FluxFillPipeline', () => {
  it('refuses a call without a mask, paddingMaskCrop, and a transformer that is not a Fill one', async () => {
    const pipe = await hf.FluxFillPipeline.tiny();
    const base = optionsOf(byName('fill-one'));
    const refused = (p: hf.FluxPipeline, options: object, code: string, ...parts: string[]) => expectRefused((p as hf.FluxFillPipeline).generate(options as hf.FluxFillGenerateOptions), code, ...parts);
    try {
      await refused(pipe, { ...base, maskImage: undefined }, 'INVALID_ARGUMENT', 'give maskImage');
      await refused(pipe, { ...base, paddingMaskCrop: 4 }, 'INVALID_ARGUMENT', 'takes no paddingMaskCrop');
      const plain = await hf.FluxPipeline.tiny();
      const { scheduler, vae, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer } = plain;
      const wrong = new hf.FluxFillPipeline({ scheduler, vae, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer });
      await refused(wrong, base, 'BAD_CONFIG', 'in_channels (64) must be 2 x out_channels (64) + 256');
      plain.dispose();
    } finally {
      pipe.dispose();
    }
  });
});
