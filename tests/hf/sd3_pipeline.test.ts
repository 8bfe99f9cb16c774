// StableDiffusion3Pipeline and the built-in tiny-sd3 against diffusers' StableDiffusion3Pipeline
// built from the same configs and seeds (tools/reference/make_sd3_pipeline_fixtures.py): the
// final latents and the images after a few steps within 2e-3 of the largest reference value
// (1.7e-6 at most measured), on one CPU device, cfg=2 (CFG's two branches on the two halves of
// the mesh), dp=2 (two prompts; two images of one), cfg=2 x dp=2, cfg=2 x ulysses=2, tp=2 and
// ring=2, each checking how the transformer's input is split; the weights' parameter keys equal
// diffusers' and transformers' (what fillRandomWeights numbers); encodePrompt equals
// encode_prompt; the transformer takes a batch split over 'cfg' as over 'dp'; fromPretrained of
// a folder in diffusers' layout saved from tiny-sd3 equals tiny(); PNGs decode to the requested
// size; 100 steps leave dt.memory() flat; bad inputs are DTorchErrors at the call. In bfloat16
// (1 device, cfg=2) against diffusers' pipeline cast to bfloat16: within 3e-2 (latents: the SD3
// transformer's own bfloat16 tolerance; 2.1e-2 measured) and 6e-2 (images; 2.8e-2 and 3.1e-2).
// That is loose: diffusers' bfloat16 run is 3.5e-2 from its float32 one.
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
import { expectClose, relativeError } from './expect_close.js';
import { settleGarbage } from '../settle_garbage.js';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const fixtures = (name: string) => fileURLToPath(new URL(`../fixtures/hf/pipelines/${name}`, import.meta.url));
const io = readSafetensorsHeader(fixtures('tiny-sd3.safetensors'));
const keys = JSON.parse(readFileSync(fixtures('tiny-sd3-keys.json'), 'utf8')) as Record<string, string[]>;
type Case = { prompt: string | string[]; prompt_3?: string; negative_prompt?: string; num_inference_steps: number; seed: number; height?: number; width?: number; guidance_scale?: number; num_images_per_prompt?: number; max_sequence_length: number };
const cases = JSON.parse(readFileSync(fixtures('tiny-sd3-cases.json'), 'utf8')) as Record<string, Case>;

const TOLERANCE = 2e-3;

function options(c: Case): hf.SD3GenerateOptions {
  return {
    prompt: c.prompt,
    ...(c.prompt_3 !== undefined ? { prompt3: c.prompt_3 } : {}),
    ...(c.negative_prompt !== undefined ? { negativePrompt: c.negative_prompt } : {}),
    numInferenceSteps: c.num_inference_steps,
    seed: c.seed,
    ...(c.height !== undefined ? { height: c.height } : {}),
    ...(c.width !== undefined ? { width: c.width } : {}),
    ...(c.guidance_scale !== undefined ? { guidanceScale: c.guidance_scale } : {}),
    ...(c.num_images_per_prompt !== undefined ? { numImagesPerPrompt: c.num_images_per_prompt } : {}),
    maxSequenceLength: c.max_sequence_length,
  };
}

const errors: string[] = [];
afterAll(() => {
  if (process.env.DTORCH_PRINT_ERRORS) console.log(errors.join('\n'));
});

async function compare(got: dt.Tensor, key: string, what: string): Promise<void> {
  const want = fixtureTensor(io, key, { mesh: got.mesh });
  errors.push(`${what}: ${(await relativeError(got, want, what)).toExponential(2)}`);
  await expectClose(got, want, TOLERANCE, what);
}

async function compareWithin(got: dt.Tensor, key: string, tolerance: number, what: string): Promise<void> {
  const want = fixtureTensor(io, key, { mesh: got.mesh });
  errors.push(`${what}: ${(await relativeError(got, want, what)).toExponential(2)}`);
  await expectClose(got, want, tolerance, what);
}

async function generate(pipe: hf.StableDiffusion3Pipeline, name: string, outputType: 'latent' | 'tensor'): Promise<dt.Tensor> {
  const { images } = await pipe.generate({ ...options(cases[name]!), outputType });
  return images as dt.Tensor;
}

describe('tiny-sd3', () => {
  it('has the parameter keys of diffusers\' and transformers\' modules (what fillRandomWeights numbers)', async () => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny();
    const sorted = (m: hf.nn.Module) => [...m.namedParameters()].map(([k]) => k).sort();
    expect(sorted(pipe.textEncoder!)).toEqual(keys['text_encoder']);
    expect(sorted(pipe.textEncoder2!)).toEqual(keys['text_encoder_2']);
    // T5's shared / encoder.embed_tokens is one tied parameter, listed once as 'shared.weight' on both sides
    expect(sorted(pipe.textEncoder3!)).toEqual(keys['text_encoder_3']);
    expect(pipe.textEncoder3!.encoder.embed_tokens.weight).toBe(pipe.textEncoder3!.shared.weight);
    expect(sorted(pipe.transformer)).toEqual(keys['transformer']);
    expect(sorted(pipe.vae)).toEqual(keys['vae']);
    expect(pipe.tokenizer3!.vocabSize, 'the T5 tokenizer\'s ids (extra ids too) fit the tiny T5').toBeLessThanOrEqual(pipe.textEncoder3!.config.vocabSize);
    pipe.dispose();
  });
});

// `split`: how the transformer's input is placed for each case (the stacked guidance batch over
// 'cfg' then 'dp'; without guidance ('three') the images over 'dp')
const meshes: { name: string; make: () => dt.DeviceMesh; split: Record<string, string> }[] = [
  { name: '1 device', make: () => new dt.DeviceMesh('cpu', [0]), split: { one: 'R', two: 'R', three: 'R' } },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), split: { one: 'S(0)', two: 'S(0)' } },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), split: { two: 'S(0)', three: 'S(0)' } },
  { name: 'cfg=2 x dp=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'dp']), split: { one: 'S(0),R', two: 'S(0),S(0)' } },
  { name: 'cfg=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'ulysses']), split: { one: 'S(0),R' } },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), split: { one: 'R' } },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), split: { one: 'R' } },
];

describe.each(meshes)('tiny-sd3 on $name matches diffusers', ({ name: meshName, make, split }) => {
  it.each(Object.keys(split))('case %s: latents and images', async (name) => {
    const mesh = make();
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh });
    const seen = new Set<string>();
    const forward = pipe.transformer.forward.bind(pipe.transformer);
    pipe.transformer.forward = (x, o) => {
      seen.add(x.placements.map(String).join());
      return forward(x, o);
    };
    const latents = await generate(pipe, name, 'latent');
    expect([...seen], 'the transformer\'s input placements').toEqual([split[name]]);
    await compare(latents, `${name}.latents`, `${meshName} ${name} latents`);
    latents.dispose();
    const images = await generate(pipe, name, 'tensor');
    await compare(images, `${name}.images`, `${meshName} ${name} images`);
    images.dispose();
    pipe.dispose();
  });
});

describe.each([meshes[0]!, meshes[1]!])('tiny-sd3 in bfloat16 on $name', ({ make }) => {
  // every component in bfloat16, against diffusers' pipeline cast with pipe.to(torch.bfloat16)
  it("one: close to diffusers' bfloat16 run", async () => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh: make(), dtype: 'bfloat16' });
    expect(pipe.transformer.proj_out.weight.dtype).toBe('bfloat16');
    const latents = await generate(pipe, 'one', 'latent');
    expect(latents.dtype).toBe('bfloat16');
    const wide = latents.to('float32');
    const images = await generate(pipe, 'one', 'tensor');
    expect(images.dtype).toBe('float32');
    // bfloat16 CPU matmuls round differently from one LibTorch build (and batch split) to the
    // next: 2.1e-2 under torch 2.13 here, 3.1e-2 on 'cfg=2' under the H200 machine's torch 2.11
    await compareWithin(wide, 'one.bf16.latents', 4e-2, 'bf16 one latents');
    await compareWithin(images, 'one.bf16.images', 6e-2, 'bf16 one images');
    dt.dispose([latents, wide, images]);
    pipe.dispose();
  });
});

describe('StableDiffusion3Pipeline', () => {
  let pipe: hf.StableDiffusion3Pipeline;
  beforeAll(async () => {
    pipe = await hf.StableDiffusion3Pipeline.tiny();
  });
  afterAll(() => pipe.dispose());

  it('encodePrompt equals diffusers\' encode_prompt', async () => {
    const c = cases['one']!;
    const e = await pipe.encodePrompt({ prompt: c.prompt, prompt3: c.prompt_3!, maxSequenceLength: c.max_sequence_length });
    await compare(e.promptEmbeds, 'one.prompt_embeds', 'prompt_embeds');
    await compare(e.pooledPromptEmbeds, 'one.pooled_prompt_embeds', 'pooled_prompt_embeds');
    await compare(e.negativePromptEmbeds!, 'one.negative_prompt_embeds', 'negative_prompt_embeds');
    await compare(e.negativePooledPromptEmbeds!, 'one.negative_pooled_prompt_embeds', 'negative_pooled_prompt_embeds');
    expect(e.promptEmbeds.shape).toEqual([1, 77 + 32, 96]);
    // given embeddings give the prompt's image
    const images = (await pipe.generate({ ...options(c), prompt: undefined, prompt3: undefined, ...e, outputType: 'latent' })).images as dt.Tensor;
    await compare(images, 'one.latents', 'one latents from promptEmbeds');
    images.dispose();
    dt.dispose(e);
    const defaults = await pipe.encodePrompt({ prompt: 'a cat', doClassifierFreeGuidance: false });
    expect(defaults.promptEmbeds.shape, 'maxSequenceLength 256 by default').toEqual([1, 77 + 256, 96]);
    expect(defaults.negativePromptEmbeds).toBeUndefined();
    dt.dispose(defaults);
  });

  it('the transformer takes a batch split over cfg as over dp', async () => {
    const spec = hf.tinyPipelineSpec('tiny-sd3');
    const build = (mesh: dt.DeviceMesh) => {
      const model = new hf.SD3Transformer2DModel(hf.SD3Transformer2DConfig.fromDict(spec.transformer!), { mesh });
      hf.fillRandomWeights(model, spec.seeds['transformer']!);
      return model;
    };
    const single = new dt.DeviceMesh('cpu', [0]);
    const cfg = new dt.DeviceMesh('cpu', [0, 1], ['cfg']);
    const inputs = (mesh: dt.DeviceMesh) => {
      const placements = hf.batchPlacementsOver(mesh, 2, ['cfg', 'dp']);
      return {
        x: dt.randn([2, 16, 8, 6], { seed: 1, mesh, placements }),
        encoderHiddenStates: dt.randn([2, 7, 96], { seed: 2, mesh, placements }),
        pooledProjections: dt.randn([2, 80], { seed: 3, mesh, placements }),
      };
    };
    const [a, b] = [build(single), build(cfg)];
    const [ia, ib] = [inputs(single), inputs(cfg)];
    expect(ib.x.placements.map(String)).toEqual(['S(0)']);
    const want = a.forward(ia.x, { ...ia, timestep: 500 });
    const got = b.forward(ib.x, { ...ib, timestep: 500 });
    expect(got.placements.map(String), 'the batch stays split over cfg').toEqual(['S(0)']);
    await expectClose(got, want.redistribute(cfg, [dt.Replicate()]), 1e-5, 'transformer on cfg=2');
    expect(hf.batchPlacementsOver(dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'dp']), 2, ['cfg', 'dp']).map(String), 'rows that do not divide stay whole').toEqual(['S(0)', 'R']);
    dt.dispose([ia, ib, want, got]);
    a.dispose();
    b.dispose();
  });

  it('writes PNGs of the requested size', async () => {
    const { images, timings } = await pipe.generate({ prompt: ['a cat', 'a dog'], height: 24, width: 40, numInferenceSteps: 2, seed: 0 });
    const pngs = images as Buffer[];
    expect(pngs).toHaveLength(2);
    for (const png of pngs) {
      const decoded = PNG.sync.read(png);
      expect([decoded.width, decoded.height]).toEqual([40, 24]);
    }
    expect(timings.denoiseMs).toBeGreaterThan(0);
  });

  it('keeps memory flat over 100 steps and reports each', async () => {
    await settleGarbage();
    const steps: hf.StepInfo[] = [];
    const live: number[] = [];
    const { images } = await pipe.generate({
      prompt: 'a cat', numInferenceSteps: 100, seed: 0, height: 16, width: 16, outputType: 'latent', maxSequenceLength: 8,
      onStep: (info) => {
        steps.push(info);
        const m = dt.memory();
        live.push(m.numTensors, m.numBytes);
      },
    });
    (images as dt.Tensor).dispose();
    expect(steps.map((s) => s.step)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(steps[0]!.steps).toBe(100);
    expect(steps[0]!.timestep).toBe(1000);
    // the same live tensors and bytes after every step
    for (let i = 2; i < live.length; i += 2) expect([live[i], live[i + 1]], `after step ${i / 2 + 1}`).toEqual([live[0], live[1]]);
  });

  it('releases its text encoders and then needs prompt embeddings', async () => {
    const own = await hf.StableDiffusion3Pipeline.tiny();
    const e = await own.encodePrompt({ prompt: 'a cat', maxSequenceLength: 8 });
    const before = dt.memory().numBytes;
    own.releaseTextEncoders();
    expect(dt.memory().numBytes).toBeLessThan(before);
    const { images } = await own.generate({ ...e, numInferenceSteps: 1, height: 16, width: 16, seed: 0, outputType: 'latent' });
    expect((images as dt.Tensor).shape).toEqual([1, 16, 8, 8]);
    (images as dt.Tensor).dispose();
    await expect(own.generate({ prompt: 'a cat' })).rejects.toThrow(/text encoders were released/);
    dt.dispose(e);
    own.dispose();
  });

  it('checks its inputs at the call', async () => {
    const code = async (options: unknown, c: string, message: RegExp) => {
      const err = await pipe.generate(options as hf.SD3GenerateOptions).then(() => undefined, (e: unknown) => e);
      expect(err, String(message)).toBeInstanceOf(dt.DTorchError);
      expect((err as dt.DTorchError).code).toBe(c);
      expect((err as Error).message).toMatch(message);
    };
    await code({ prompt: 'a cat', height: 30 }, 'INVALID_ARGUMENT', /height and width must be multiples of 4 \(the VAE's scale factor times the patch size\), got 32x30 \(width x height\); e\.g\. 32x32/);
    await code({ prompt: 'a cat', height: 256, width: 64 }, 'INVALID_ARGUMENT', /64x256 \(width x height\) is larger than this model takes: at most 128 a side \(pos_embed_max_size 32 x patch 2 x VAE scale 2\)/);
    await code({ prompt: 'a cat', steps: 3 }, 'INVALID_ARGUMENT', /Unknown option "steps"/);
    await code({ prompt: 'a cat', num_inference_steps: 3 }, 'INVALID_ARGUMENT', /did you mean numInferenceSteps/);
    await code({ prompt: 'a cat', trueCfgScale: 4 }, 'INVALID_ARGUMENT', /trueCfgScale is FluxPipeline's/);
    await code({}, 'INVALID_ARGUMENT', /give prompt or promptEmbeds/);
    await code({ prompt: 'a cat', maxSequenceLength: 600 }, 'INVALID_ARGUMENT', /maxSequenceLength cannot be greater than 512/);
    await code({ prompt: 'a cat', outputType: 'pil' }, 'INVALID_ARGUMENT', /outputType/);
    await code({ prompt: ['a', 'b'], negativePrompt: ['c', 'd', 'e'] }, 'INVALID_ARGUMENT', /StableDiffusion3Pipeline.generate: negativePrompt has 3 prompts but the batch 2/);
    await code({ prompt: 'a cat', latents: dt.zeros([1, 16, 4, 4]) }, 'SHAPE_MISMATCH', /latents must be \[1, 16, 16, 16\]/);
    const e = await pipe.encodePrompt({ prompt: 'a cat', maxSequenceLength: 8 });
    await code({ prompt: 'a cat', ...e }, 'INVALID_ARGUMENT', /give prompt or promptEmbeds, not both/);
    await code({ promptEmbeds: e.promptEmbeds }, 'INVALID_ARGUMENT', /with promptEmbeds give pooledPromptEmbeds too/);
    await code({ promptEmbeds: e.promptEmbeds, pooledPromptEmbeds: e.pooledPromptEmbeds, numImagesPerPrompt: 2 }, 'INVALID_ARGUMENT', /numImagesPerPrompt is for prompts/);
    dt.dispose(e);
  });

  it('warns when a prompt is truncated, as diffusers', async () => {
    const warnings: string[] = [];
    const warn = console.warn;
    const error = console.error;
    console.warn = console.error = (...args: unknown[]) => void warnings.push(args.join(' '));
    try {
      const e = await pipe.encodePrompt({ prompt: Array.from({ length: 90 }, (_, i) => `word${i}`).join(' '), maxSequenceLength: 8, doClassifierFreeGuidance: false });
      dt.dispose(e);
    } finally {
      console.warn = warn;
      console.error = error;
    }
    expect(warnings.some((w) => /truncated because CLIP can only handle sequences up to 77 tokens/.test(w)), warnings.join('\n')).toBe(true);
    expect(warnings.some((w) => /truncated because `maxSequenceLength` is set to 8 tokens/.test(w)), warnings.join('\n')).toBe(true);
  });
});

describe('StableDiffusion3Pipeline.fromPretrained', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dtorch-tiny-sd3-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a folder saved from tiny-sd3 that generates what tiny() does', async () => {
    const tiny = await hf.StableDiffusion3Pipeline.tiny();
    await saveTinyPipeline(dir, 'tiny-sd3', { text_encoder: tiny.textEncoder!, text_encoder_2: tiny.textEncoder2!, text_encoder_3: tiny.textEncoder3!, transformer: tiny.transformer, vae: tiny.vae });
    // the text encoders on a device of their own
    const textEncoderMesh = new dt.DeviceMesh('cpu', [1]);
    const loaded = await hf.StableDiffusion3Pipeline.fromPretrained(dir, { textEncoderMesh });
    expect(loaded.textEncoder3!.shared.weight.mesh.equals(textEncoderMesh)).toBe(true);
    const generic = await hf.DiffusionPipeline.fromPretrained(dir);
    expect(generic).toBeInstanceOf(hf.StableDiffusion3Pipeline);
    generic.dispose();
    const o = { ...options(cases['one']!), outputType: 'tensor' as const };
    const [a, b] = [(await tiny.generate(o)).images as dt.Tensor, (await loaded.generate(o)).images as dt.Tensor];
    expect(await relativeError(b, a.redistribute(b.mesh, b.placements))).toBe(0);
    dt.dispose([a, b]);
    tiny.dispose();
    loaded.dispose();
  });

  it('names what is wrong with a folder', async () => {
    await expect(hf.StableDiffusion3Pipeline.fromPretrained(dir, { mesh: 3 } as never)).rejects.toThrow(/Expected DeviceMesh for StableDiffusion3Pipeline.fromPretrained mesh/);
    await expect(hf.StableDiffusion3Pipeline.fromPretrained(dir, { meshes: 3 } as never)).rejects.toThrow(/Unknown option "meshes"/);
    await expect(hf.StableDiffusion3Pipeline.fromPretrained(join(dir, 'vae'))).rejects.toThrow(/has no model_index.json/);
  });
});
