// shapes-flux, the built-in trained pipeline (tools/shapes: FLUX.1-dev's classes at a tiny size,
// trained on drawn shapes): loaded through DiffusionPipeline.fromPretrained of its folder as any
// saved pipeline, it gives diffusers' images for the same prompts and seeds
// (tools/shapes/make_fixtures.py: diffusers' FluxPipeline on the shipped folder, float32, CPU), and
// its pictures show what they are asked for: for 12 held-out captions (never trained on), the
// named background at the border and each object's colour where the caption puts it
// (shapes_check.ts, the check tools/shapes/scenes.py makes; the test's own agreement with it is
// checked on drawn scenes first), on 1 CPU device and on ulysses=2, tp=2, cfg=2 (true CFG) and
// dp=2 meshes, and through the `dtorch` command as a process. At least as many captions pass as
// passed with diffusers' pictures less one (the model's accuracy over 100 held-out captions is
// in packages/hf/assets/shapes-flux/README.md).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { checkBuilt, dtorch } from './dtorch_command.js';
import { expectClose } from './expect_close.js';
import { check, measure, type Picture } from './shapes_check.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/shapes/', import.meta.url));
const reference = readSafetensorsHeader(join(fixtures, 'shapes-flux.safetensors'));
const drawn = readSafetensorsHeader(join(fixtures, 'drawn.safetensors'));
interface Case {
  name: string;
  prompt: string[];
  seed: number;
  negative_prompt?: string[];
  true_cfg_scale?: number;
  max_sequence_length: number;
}
const spec = JSON.parse(readFileSync(join(fixtures, 'shapes-flux.json'), 'utf8')) as {
  steps: number;
  size: number;
  max_sequence_length: number;
  cases: Case[];
  semantic: { captions: string[]; seeds: number[]; diffusers_passed: boolean[]; negative_prompt: string[]; true_cfg_scale: number };
};
const drawnScenes = JSON.parse(readFileSync(join(fixtures, 'drawn.json'), 'utf8')) as {
  caption: string;
  measure: { border: string; background: string; objects: { spread: number; offset: number | null }[] };
  check: { ok: boolean };
}[];

// diffusers' float32 images on the CPU against DTorch's: the same float32 arithmetic in another order
const TOLERANCE = 2e-3;
// the model passes 50% of 100 held-out captions with true CFG (train_log.json): at least 5 of these
// 12 must pass with diffusers too, or the fixture came from a broken model
const diffusersPassed = spec.semantic.diffusers_passed.filter(Boolean).length;
const required = diffusersPassed - 1;

/** Picture i of a [B, 3, H, W] image tensor in [0, 1], as 8-bit RGB (as the PNG would hold it). */
async function picture(images: dt.Tensor, i: number): Promise<Picture> {
  const [, , height, width] = images.shape as number[];
  const values = (await images.data()) as Float32Array;
  const plane = height! * width!;
  const data = new Uint8Array(plane * 3);
  for (let p = 0; p < plane; p++) {
    for (let c = 0; c < 3; c++) data[p * 3 + c] = Math.round(Math.min(1, Math.max(0, values[(i * 3 + c) * plane + p]!)) * 255);
  }
  return { width: width!, height: height!, channels: 3, data };
}

describe('the shapes check', () => {
  it("measures drawn scenes as tools/shapes/scenes.py does, and passes every one", async () => {
    const pictures = fixtureTensor(drawn, 'pictures');
    const bytes = (await pictures.data()) as Uint8Array;
    pictures.dispose();
    const size = spec.size * spec.size * 3;
    drawnScenes.forEach((scene, i) => {
      const p: Picture = { width: spec.size, height: spec.size, channels: 3, data: bytes.subarray(i * size, (i + 1) * size) };
      const m = measure(p, scene.caption);
      expect(m.border, scene.caption).toBe(scene.measure.border);
      expect(m.background).toBe(scene.measure.background);
      m.objects.forEach((o, j) => {
        expect(o.spread, scene.caption).toBeCloseTo(scene.measure.objects[j]!.spread, 6);
        if (scene.measure.objects[j]!.offset === null) expect(o.offset).toBeNull();
        else expect(o.offset, scene.caption).toBeCloseTo(scene.measure.objects[j]!.offset!, 6);
      });
      expect(check(p, scene.caption).ok, scene.caption).toBe(true);
      expect(scene.check.ok).toBe(true);
    });
  });

  it('fails a picture of the wrong scene', async () => {
    const pictures = fixtureTensor(drawn, 'pictures');
    const bytes = (await pictures.data()) as Uint8Array;
    pictures.dispose();
    const size = spec.size * spec.size * 3;
    // each drawn picture against the next one's caption: another background or other objects
    let failed = 0;
    drawnScenes.forEach((scene, i) => {
      const other = drawnScenes[(i + 1) % drawnScenes.length]!.caption;
      const p: Picture = { width: spec.size, height: spec.size, channels: 3, data: bytes.subarray(i * size, (i + 1) * size) };
      if (other !== scene.caption && !check(p, other).ok) failed++;
    });
    expect(failed).toBeGreaterThanOrEqual(drawnScenes.length - 1);
  });
});

const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]) },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']) },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']) },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']) },
];

describe.each(meshes)('shapes-flux on $name', ({ name, make }) => {
  let pipe: hf.DiffusionPipeline;
  beforeAll(async () => {
    const folder = await hf.registry.trainedPipelines['shapes-flux']!.folder();
    // float32 as diffusers' reference ran (the text encoders' configs say bfloat16, the dtype they were saved in)
    pipe = await hf.DiffusionPipeline.fromPretrained(folder, { mesh: make(), dtype: 'float32' });
  });
  afterAll(() => pipe?.dispose());

  it("gives diffusers' images", async () => {
    const dp = name.startsWith('dp');
    for (const c of spec.cases) {
      // on dp=2 a one-prompt case runs twice in one call: image 0's noise is the first draw of the seed's generator, as alone
      const twice = dp && c.prompt.length === 1;
      const { images: all } = await pipe.generate({
        prompt: twice ? [...c.prompt, ...c.prompt] : c.prompt, seed: c.seed, height: spec.size, width: spec.size, numInferenceSteps: spec.steps, maxSequenceLength: c.max_sequence_length, outputType: 'tensor',
        ...(c.negative_prompt && { negativePrompt: twice ? [...c.negative_prompt, ...c.negative_prompt] : c.negative_prompt }),
        ...(c.true_cfg_scale !== undefined && { trueCfgScale: c.true_cfg_scale }),
      });
      const images = twice ? dt.narrow((all as dt.Tensor).redistribute([dt.Replicate()]), 0, 0, 1) : all;
      if (twice) (all as dt.Tensor).dispose();
      await expectClose(images as dt.Tensor, fixtureTensor(reference, `${c.name}.image`), TOLERANCE, `${name} ${c.name}`);
      (images as dt.Tensor).dispose();
    }
  });

  it('draws what the held-out captions ask for', async () => {
    expect(diffusersPassed).toBeGreaterThanOrEqual(5);
    const dp = name.startsWith('dp');
    const results: string[] = [];
    let passed = 0;
    // one call per caption: each caption's seed is its own (as the fixture script ran them)
    for (const [i, caption] of spec.semantic.captions.entries()) {
      const { images } = await pipe.generate({
        prompt: dp ? [caption, caption] : caption, seed: spec.semantic.seeds[i]!, height: spec.size, width: spec.size, numInferenceSteps: spec.steps,
        maxSequenceLength: spec.max_sequence_length, outputType: 'tensor',
        // true CFG, as shapes-flux runs by default: on a cfg mesh its two branches run on the two devices
        negativePrompt: dp ? [...spec.semantic.negative_prompt, ...spec.semantic.negative_prompt] : spec.semantic.negative_prompt,
        trueCfgScale: spec.semantic.true_cfg_scale,
      });
      const r = check(await picture(images as dt.Tensor, 0), caption);
      (images as dt.Tensor).dispose();
      if (r.ok) passed++;
      results.push(`${r.ok ? 'pass' : 'FAIL'} ${caption} ${JSON.stringify(r.measures.objects)} border ${r.measures.border}`);
    }
    expect(passed, results.join('\n')).toBeGreaterThanOrEqual(required);
  });
});

describe('dtorch generate --model shapes-flux', () => {
  let work: string;
  beforeAll(() => {
    checkBuilt();
    work = mkdtempSync(join(tmpdir(), 'dtorch-shapes-cli-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('draws the asked-for scene on 2 CPU devices with ulysses=2, at the size it was trained for', () => {
    const caption = spec.semantic.captions.find((_, i) => spec.semantic.diffusers_passed[i])!;
    const seed = spec.semantic.seeds[spec.semantic.captions.indexOf(caption)]!;
    const out = join(work, 'shapes.png');
    const r = dtorch(work, ['generate', '--model', 'shapes-flux', '--prompt', caption, '--seed', String(seed), '--devices', 'cpu:0,1', '--parallel', 'ulysses=2', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('shapes-flux is built in: FLUX.1-dev');
    expect(r.stdout).toMatch(/\(20 steps/);
    const png = PNG.sync.read(readFileSync(out));
    expect([png.width, png.height]).toEqual([128, 128]);
    const result = check({ width: png.width, height: png.height, channels: 4, data: png.data }, caption);
    expect(result.ok, `${caption}: ${JSON.stringify(result.measures)}`).toBe(true);
  });
});
