// FLUX.1-Kontext (issue 43): FluxKontextPipeline on the built-in tiny-flux against diffusers'
// FluxKontextPipeline (tools/reference/make_kontext_fixtures.py: the same PNGs, the same seeds,
// _auto_resize off) on one CPU device and on meshes, the reference's tokens split over 'ulysses'
// and 'ring' with the latents' in uneven pieces; the resolution autoResize picks as diffusers'.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { caseNamed, commonOptions, expectFixtureCase, type ImageCase } from './pipeline_fixture_case.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'tiny-kontext.safetensors'));

interface Case extends ImageCase {
  image?: string[];
  max_area: number;
}
const fixture = JSON.parse(readFileSync(join(fixtures, 'tiny-kontext-cases.json'), 'utf8')) as { cases: Case[]; auto_resize: Record<string, [number, number]> };
const byName = (name: string) => caseNamed(fixture.cases, name);

function optionsOf(c: Case): hf.FluxKontextGenerateOptions {
  return { ...commonOptions(c), maxArea: c.max_area, autoResize: false, ...(c.image ? { image: join(fixtures, c.image[0]!) } : {}) };
}

const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['kontext-one', 'kontext-uneven', 'kontext-none'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['kontext-one', 'kontext-uneven'] },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), cases: ['kontext-uneven'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['kontext-one'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), cases: ['kontext-uneven'] },
];

describe.each(meshes)('FLUX.1-Kontext on $name matches diffusers', ({ name: meshName, make, cases: names }) => {
  let pipe: hf.FluxKontextPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxKontextPipeline.tiny({ mesh: make() });
  });
  afterAll(() => pipe.dispose());

  it.each(names)('%s: latents and images', async (name) => {
    const c = byName(name);
    await expectFixtureCase((o) => pipe.generate(o as never), optionsOf(c), io, name, `${name} on ${meshName}`);
  });
});

describe('FluxKontextPipeline', () => {
  it("autoResize picks diffusers' Kontext resolution for each aspect ratio", () => {
    for (const [ratio, [width, height]] of Object.entries(fixture.auto_resize)) expect(hf.nearestKontextResolution(Number(ratio)), `aspect ${ratio}`).toEqual([width, height]);
  });

  it('refuses a bad maxArea or autoResize, and more images than the batch takes', async () => {
    const pipe = await hf.FluxKontextPipeline.tiny();
    try {
      const base = optionsOf(byName('kontext-one'));
      await expect(pipe.generate({ ...base, maxArea: 0 })).rejects.toThrow(/maxArea/);
      await expect(pipe.generate({ ...base, autoResize: 'yes' as never })).rejects.toThrow(/autoResize/);
      const two = [join(fixtures, 'img2img-a.png'), join(fixtures, 'img2img-b.png'), join(fixtures, 'img2img-a.png')];
      await expect(pipe.generate({ ...base, prompt: ['a', 'b'], image: two })).rejects.toThrow(/3 images cannot be repeated to a batch of 2/);
    } finally {
      pipe.dispose();
    }
  });
});
