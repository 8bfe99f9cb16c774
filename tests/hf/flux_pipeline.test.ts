// FluxPipeline: the built-in tiny-flux against diffusers' FluxPipeline built from the same
// configs and weights (tools/reference/make_flux_pipeline_fixtures.py: tiny-flux.json's configs,
// random_weights.py's fill with the same seeds, the same tokenizers), end to end: the final
// packed latents (output_type "latent") and the images (output_type "pt") after a few steps, for
// fixed prompts and seeds, within 2e-3 of the largest reference value (2.1e-6 measured) on one
// CPU device, on 'ulysses' 2 (tokens split in the transformer), 'ring' 2, 'tp' 2, 'dp' 2 (the two
// prompts or images apart), 2x2 dp x ulysses, and with the text encoders on a device of their
// own; true CFG with a negative prompt; two images per prompt; a prompt cut at CLIP's 77 and T5's
// maxSequenceLength tokens, with warnings. In bfloat16, against diffusers' pipeline cast to
// bfloat16: 5.7e-3 (latents), 2.9e-2 (images). fromPretrained of tiny-flux saved as
// diffusers' save_pretrained lays a pipeline out gives tiny()'s images; PNGs decode (pngjs) to the
// requested size; 100 steps keep live tensors and bytes flat; bad calls are DTorchErrors naming
// what is wrong.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose, relativeError } from './expect_close.js';
import { settleGarbage } from '../settle_garbage.js';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'tiny-flux.safetensors'));
const keys = JSON.parse(readFileSync(join(fixtures, 'tiny-flux-keys.json'), 'utf8')) as Record<string, string[]>;
const spec = JSON.parse(readFileSync(fileURLToPath(new URL('../../packages/hf/assets/tiny-pipelines/tiny-flux.json', import.meta.url)), 'utf8')) as Record<string, hf.JsonObject>;

interface Case {
  name: string;
  prompt: string | string[];
  negative_prompt?: string;
  true_cfg_scale?: number;
  guidance_scale?: number;
  num_images_per_prompt?: number;
  height: number;
  width: number;
  num_inference_steps: number;
  seed: number;
  max_sequence_length: number;
}
const cases = JSON.parse(readFileSync(join(fixtures, 'tiny-flux-cases.json'), 'utf8')) as Case[];
const byName = (name: string) => cases.find((c) => c.name === name)!;

// the fixture script's arguments, camelCase
function optionsOf(c: Case): hf.FluxGenerateOptions {
  return {
    prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, seed: c.seed, maxSequenceLength: c.max_sequence_length,
    ...(c.negative_prompt !== undefined ? { negativePrompt: c.negative_prompt } : {}),
    ...(c.true_cfg_scale !== undefined ? { trueCfgScale: c.true_cfg_scale } : {}),
    ...(c.guidance_scale !== undefined ? { guidanceScale: c.guidance_scale } : {}),
    ...(c.num_images_per_prompt !== undefined ? { numImagesPerPrompt: c.num_images_per_prompt } : {}),
  };
}

const TOLERANCE = 2e-3;
const sortedKeys = (m: hf.nn.Module) => [...m.namedParameters()].map(([k]) => k).sort();

// warnings go to console.error through @dtorch/common's log
function captureWarnings() {
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'error').mockImplementation((line: unknown) => void lines.push(String(line)));
  return { lines, restore: () => spy.mockRestore() };
}

describe('tiny-flux', () => {
  // how long tiny() takes is the example's 'load' figure (npm run example), not a test's: under
  // CI's parallel suites on 2 cores it took 3.7 s once where it takes about 1 s alone
  it('is made with no download, with the parameter keys of diffusers and transformers', async () => {
    const pipe = await hf.FluxPipeline.tiny();
    // the keys in sorted order are the order fillRandomWeights draws them: both sides must agree
    // transformers 5's CLIPTextModel lists its parameters without the checkpoints' "text_model." (the same order)
    expect(sortedKeys(pipe.textEncoder!).map((k) => k.replace(/^text_model\./, ''))).toEqual(keys['text_encoder']);
    expect(sortedKeys(pipe.textEncoder2!)).toEqual(keys['text_encoder_2']);
    expect(sortedKeys(pipe.transformer)).toEqual(keys['transformer']);
    expect(sortedKeys(pipe.vae)).toEqual(keys['vae']);
    // T5's tied embedding: one parameter, under "shared.weight" on both sides
    expect(pipe.textEncoder2!.encoder.embed_tokens.weight).toBe(pipe.textEncoder2!.shared.weight);
    expect(keys['text_encoder_2']).toContain('shared.weight');
    expect(keys['text_encoder_2']).not.toContain('encoder.embed_tokens.weight');
    expect(pipe.vaeScaleFactor).toBe(8);
    expect(pipe.transformer.config.guidanceEmbeds).toBe(true);
    expect(pipe.scheduler.config.useDynamicShifting).toBe(true);
    expect(pipe.tokenizer!.modelMaxLength).toBe(77);
    expect(pipe.textEncoder!.config.vocabSize).toBe(49408);
    expect(pipe.textEncoder2!.config.vocabSize, "every T5 id (extra ids too) has an embedding").toBeGreaterThanOrEqual(pipe.tokenizer2!.vocabSize);
    pipe.dispose();
  });

  it("encodePrompt gives diffusers' encode_prompt (T5's hidden states, CLIP's pooled output, zero text ids)", async () => {
    const pipe = await hf.FluxPipeline.tiny();
    const { promptEmbeds, pooledPromptEmbeds, textIds } = await pipe.encodePrompt({ prompt: 'a photo of a cat', maxSequenceLength: 16 });
    await expectClose(promptEmbeds, fixtureTensor(io, 'encode.prompt_embeds'), 1e-5, 'prompt_embeds');
    await expectClose(pooledPromptEmbeds, fixtureTensor(io, 'encode.pooled_prompt_embeds'), 1e-5, 'pooled_prompt_embeds');
    expect(textIds.shape).toEqual([16, 3]);
    expect([...((await textIds.data()) as Float32Array)].every((v) => v === 0)).toBe(true);
    dt.dispose([promptEmbeds, pooledPromptEmbeds, textIds]);
    pipe.dispose();
  });
});

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  /** The text encoders' mesh, when not the pipeline's. */
  textEncoders?: () => dt.DeviceMesh;
  cases: string[];
}

const meshes: MeshCase[] = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['one', 'two', 'cfg', 'per-prompt'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['one', 'two', 'cfg'] },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), cases: ['one'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), cases: ['two', 'per-prompt'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['one'] },
  { name: 'dp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']), cases: ['two'] },
  // true CFG's branches side by side (CFG parallel)
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), cases: ['cfg'] },
  { name: 'cfg=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'ulysses']), cases: ['cfg'] },
  // the text encoders on a device of their own, the transformer and VAE over two
  { name: 'ulysses=2, text encoders on cpu:2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), textEncoders: () => new dt.DeviceMesh('cpu', [2]), cases: ['cfg'] },
];

describe.each(meshes)('tiny-flux on $name matches diffusers', ({ name: meshName, make, textEncoders, cases: names }) => {
  let pipe: hf.FluxPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny({ mesh: make(), ...(textEncoders ? { textEncoderMesh: textEncoders() } : {}) });
  });
  afterAll(() => pipe.dispose());

  it.each(names)('%s: latents and images after a few steps', async (name) => {
    const before = dt.memory().numTensors;
    const c = byName(name);
    const warnings = captureWarnings();
    let latent: hf.GenerateOutput;
    let image: hf.GenerateOutput;
    // on a 'cfg' mesh every transformer call takes both branches, batched, split over 'cfg'
    const batches: number[] = [];
    const forward = pipe.transformer.forward.bind(pipe.transformer);
    pipe.transformer.forward = (x, options) => (batches.push(x.shape[0]!), forward(x, options));
    try {
      latent = await pipe.generate({ ...optionsOf(c), outputType: 'latent' });
      image = await pipe.generate({ ...optionsOf(c), outputType: 'tensor' });
    } finally {
      warnings.restore();
      pipe.transformer.forward = forward;
    }
    if (meshName.startsWith('cfg=2')) expect(new Set(batches), 'one call per step with [negative; positive]').toEqual(new Set([2 * (Array.isArray(c.prompt) ? c.prompt.length : 1) * (c.num_images_per_prompt ?? 1)]));
    const latents = latent.images as dt.Tensor;
    const images = image.images as dt.Tensor;
    if (meshName.startsWith('dp=2')) expect(latents.placements[0]!.toString(), 'the batch is split over dp').toBe('S(0)');
    if (textEncoders) expect(pipe.textEncoder!.text_model.embeddings.token_embedding.weight.mesh.equals(pipe.mesh)).toBe(false);
    const what = `${name} on ${meshName}`;
    await expectClose(latents, fixtureTensor(io, `${name}.latent`), TOLERANCE, `${what} latents`);
    await expectClose(images, fixtureTensor(io, `${name}.image`), TOLERANCE, `${what} images`);
    if (name === 'two') {
      // the second prompt is longer than CLIP's 77 tokens and T5's 16: cut, with a warning each (per run)
      expect(warnings.lines.filter((l) => l.includes("CLIP's limit (77)")).length).toBe(2);
      expect(warnings.lines.filter((l) => l.includes('maxSequenceLength (16)')).length).toBe(2);
    } else if (name === 'per-prompt') {
      // "a bowl of fruit" is 11 T5 tokens: cut at 8, as diffusers warns
      expect(warnings.lines).toEqual(Array(2).fill('[dtorch warn] FluxPipeline.encodePrompt: prompt "a bowl of fruit" has 11 tokens, more than maxSequenceLength (8); truncated, removing "ruit"'));
    } else {
      expect(warnings.lines).toEqual([]);
    }
    dt.dispose([latents, images]);
    await dt.sync();
    expect(dt.memory().numTensors, 'no tensors left behind').toBe(before);
  });
});

describe.each([meshes[0]!, meshes[1]!])('tiny-flux in bfloat16 on $name', ({ make }) => {
  // every component in bfloat16, against diffusers' pipeline cast with pipe.to(torch.bfloat16):
  // the same rounding points, so well within what bfloat16 itself moves the result (diffusers'
  // own bfloat16 run is 0.18 (latents) and 0.36 (images) from its float32 one)
  it("one: close to diffusers' bfloat16 run", async () => {
    const pipe = await hf.FluxPipeline.tiny({ mesh: make(), dtype: 'bfloat16' });
    expect(pipe.transformer.x_embedder.weight.dtype).toBe('bfloat16');
    const c = byName('one');
    const latents = (await pipe.generate({ ...optionsOf(c), outputType: 'latent' })).images as dt.Tensor;
    expect(latents.dtype).toBe('bfloat16');
    const images = (await pipe.generate({ ...optionsOf(c), outputType: 'tensor' })).images as dt.Tensor;
    expect(images.dtype).toBe('float32');
    const wide = latents.to('float32');
    await expectClose(wide, fixtureTensor(io, 'one.bf16.latent'), 2e-2, 'one in bfloat16 latents');
    await expectClose(images, fixtureTensor(io, 'one.bf16.image'), 6e-2, 'one in bfloat16 images');
    dt.dispose([latents, wide, images]);
    pipe.dispose();
  });
});

describe('FluxPipeline.generate', () => {
  let pipe: hf.FluxPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny();
  });
  afterAll(() => pipe?.dispose());
  const small = { prompt: 'a cat', height: 32, width: 48, numInferenceSteps: 2, seed: 5, maxSequenceLength: 8 };

  it('gives PNGs (the default) that decode to the requested size, one per image', async () => {
    const { images, timings } = await pipe.generate({ ...small, prompt: ['a cat', 'a dog'] });
    expect(Array.isArray(images)).toBe(true);
    const pngs = images as Buffer[];
    expect(pngs.length).toBe(2);
    for (const png of pngs) {
      const decoded = PNG.sync.read(png);
      expect([decoded.width, decoded.height]).toEqual([48, 32]);
    }
    for (const ms of Object.values(timings)) expect(ms).toBeGreaterThanOrEqual(0);
    // the PNG's pixels are round(255 · the tensor output)
    const tensor = (await pipe.generate({ ...small, prompt: ['a cat', 'a dog'], outputType: 'tensor' })).images as dt.Tensor;
    const values = (await tensor.data()) as Float32Array;
    const first = PNG.sync.read(pngs[0]!);
    expect(first.data[0]).toBe(Math.round(values[0]! * 255));
    expect(first.data[1]).toBe(Math.round(values[32 * 48]! * 255));
    tensor.dispose();
  });

  it('reports each step (StepInfo) and takes given latents and prompt embeddings as diffusers', async () => {
    const steps: hf.StepInfo[] = [];
    const reference = (await pipe.generate({ ...small, outputType: 'latent', onStep: (s) => steps.push(s) })).images as dt.Tensor;
    expect(steps.map((s) => [s.step, s.steps])).toEqual([[1, 2], [2, 2]]);
    expect(steps[0]!.timestep).toBeGreaterThan(steps[1]!.timestep);
    expect(steps[1]!.elapsedMs).toBeGreaterThanOrEqual(steps[0]!.elapsedMs);
    // the same noise given as latents (packed), and the prompt given encoded
    const noise = dt.tidy(() => hf.packLatents(dt.randn([1, 16, 4, 6], { seed: small.seed })));
    const encoded = await pipe.encodePrompt({ prompt: small.prompt, maxSequenceLength: small.maxSequenceLength });
    const given = (await pipe.generate({ ...small, prompt: undefined, seed: undefined, latents: noise, promptEmbeds: encoded.promptEmbeds, pooledPromptEmbeds: encoded.pooledPromptEmbeds, outputType: 'latent' })).images as dt.Tensor;
    expect(await relativeError(given, reference)).toBe(0);
    expect(noise.isDisposed, "the user's latents are left alone").toBe(false);
    expect(encoded.promptEmbeds.isDisposed).toBe(false);
    dt.dispose([reference, given, noise, encoded]);
  });

  it('runs calls made at once one after the other (each sets the scheduler), with the results of calls made in turn', async () => {
    const call = { ...small, outputType: 'latent' as const, onStep: () => undefined };
    const [a, b] = await Promise.all([pipe.generate(call), pipe.generate({ ...call, numInferenceSteps: 3 })]);
    const alone = await pipe.generate(call);
    expect(await relativeError(a.images as dt.Tensor, alone.images as dt.Tensor)).toBe(0);
    expect((b.images as dt.Tensor).shape).toEqual([1, 6, 64]);
    dt.dispose([a.images, b.images, alone.images]);
  });

  it('keeps live tensors and bytes flat over 100 steps', async () => {
    await settleGarbage();
    const seen: { numTensors: number; numBytes: number }[] = [];
    const out = await pipe.generate({
      ...small, numInferenceSteps: 100, outputType: 'latent',
      onStep: () => {
        const { numTensors, numBytes } = dt.memory();
        seen.push({ numTensors, numBytes });
      },
    });
    expect(seen.length).toBe(100);
    expect(new Set(seen.map((m) => `${m.numTensors}/${m.numBytes}`)).size, 'the same live tensors and bytes after every step').toBe(1);
    (out.images as dt.Tensor).dispose();
  });

  it('refuses bad calls with DTorchErrors naming the problem', async () => {
    const bad = (options: unknown) => pipe.generate(options as hf.FluxGenerateOptions);
    await expect(bad({ ...small, height: 40 })).rejects.toThrow(/height and width must be multiples of 16 .* got 48x40 \(width x height\); e\.g\. 48x48/);
    await expect(bad({ ...small, width: 0 })).rejects.toThrow(dt.DTorchError);
    await expect(bad({ ...small, numSteps: 3 })).rejects.toThrow(/Unknown option "numSteps" in FluxPipeline.generate options/);
    await expect(bad({ ...small, max_sequence_length: 3 })).rejects.toThrow(/did you mean maxSequenceLength\?/);
    await expect(bad({ ...small, prompt3: 'x' })).rejects.toThrow(/Unknown option "prompt3"/);
    await expect(bad({ ...small, maxSequenceLength: 513 })).rejects.toThrow(/maxSequenceLength cannot be greater than 512 but is 513/);
    await expect(bad({ ...small, prompt: undefined })).rejects.toThrow(/give prompt, or promptEmbeds and pooledPromptEmbeds/);
    await expect(bad({ ...small, prompt: 3 })).rejects.toThrow(/Expected a string or a non-empty array of strings for FluxPipeline.generate prompt/);
    await expect(bad({ ...small, outputType: 'pil' })).rejects.toThrow(/outputType/);
    await expect(bad({ ...small, numImagesPerPrompt: 0 })).rejects.toThrow(/numImagesPerPrompt/);
    await expect(bad({ ...small, sigmas: [1, 0.5, 0.2] })).rejects.toThrow(/sigmas/);
    await expect(bad({ ...small, prompt: ['a', 'b'], negativePrompt: ['x', 'y', 'z'], trueCfgScale: 2 })).rejects.toThrow(/negativePrompt has 3 prompts but the batch 2/);
    const embeds = dt.zeros([1, 8, 32]);
    await expect(bad({ ...small, seed: undefined, latents: embeds })).rejects.toThrow(/latents must be packed \[1, 6, 64\]/);
    await expect(bad({ ...small, promptEmbeds: embeds })).rejects.toThrow(/give prompt \(and prompt2\) or promptEmbeds, not both/);
    await expect(bad({ ...small, prompt: undefined, promptEmbeds: embeds })).rejects.toThrow(/promptEmbeds needs pooledPromptEmbeds/);
    embeds.dispose();
    // an unused setting is a warning, not a silent change
    const warnings = captureWarnings();
    try {
      dt.dispose((await pipe.generate({ ...small, numInferenceSteps: 1, negativePrompt: 'x', outputType: 'latent' })).images);
      dt.dispose((await pipe.generate({ ...small, numInferenceSteps: 1, trueCfgScale: 3, outputType: 'latent' })).images);
    } finally {
      warnings.restore();
    }
    expect(warnings.lines.join('\n')).toMatch(/the negative prompt is not used: true classifier-free guidance needs trueCfgScale > 1/);
    expect(warnings.lines.join('\n')).toMatch(/trueCfgScale 3 is not used: true classifier-free guidance needs a negative prompt/);
  });

  it("warns that a mesh dim Flux does not split work over repeats it", async () => {
    const warnings = captureWarnings();
    let cfg: hf.FluxPipeline | undefined;
    try {
      cfg = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0, 1], ['sp']) });
    } finally {
      warnings.restore();
    }
    expect(warnings.lines.join('\n')).toMatch(/mesh dims 'sp' are not ones Flux splits work over \(ulysses, ring, tp, dp, cfg\); the work is repeated on them/);
    cfg?.dispose();
  });

  it("refuses a batch that the mesh's 'dp' dim does not divide", async () => {
    const dp = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0, 1], ['dp']) });
    await expect(dp.generate({ ...small })).rejects.toThrow(/the mesh's 'dp' dim \(2\) splits the batch, but the batch is 1 \(1 prompt x 1 image\)/);
    dp.dispose();
  });

  it('after releaseTextEncoders, takes encoded prompts and refuses prompts clearly', async () => {
    const own = await hf.FluxPipeline.tiny();
    const encoded = await own.encodePrompt({ prompt: small.prompt, maxSequenceLength: small.maxSequenceLength });
    const before = (await own.generate({ ...small, outputType: 'latent' })).images as dt.Tensor;
    own.releaseTextEncoders();
    expect(own.textEncoder).toBeNull();
    await expect(own.generate({ ...small })).rejects.toThrow(/no text encoders \(released, or built without them\): pass promptEmbeds and pooledPromptEmbeds/);
    const after = (await own.generate({ ...small, prompt: undefined, promptEmbeds: encoded.promptEmbeds, pooledPromptEmbeds: encoded.pooledPromptEmbeds, outputType: 'latent' })).images as dt.Tensor;
    expect(await relativeError(after, before)).toBe(0);
    dt.dispose([before, after, encoded]);
    own.dispose();
  });
});

describe('FluxPipeline.fromPretrained', () => {
  it('loads a saved tiny-flux (also through DiffusionPipeline.fromPretrained) and gives the same images', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'dtorch-tiny-flux-'));
    try {
      const tiny = await hf.FluxPipeline.tiny();
      await saveTinyPipeline(folder, 'tiny-flux', { text_encoder: tiny.textEncoder!, text_encoder_2: tiny.textEncoder2!, transformer: tiny.transformer, vae: tiny.vae });
      const call = { prompt: 'a red fox', height: 32, width: 32, numInferenceSteps: 2, seed: 9, maxSequenceLength: 8, outputType: 'tensor' as const };
      const want = (await tiny.generate(call)).images as dt.Tensor;
      tiny.dispose();
      const loaded = await hf.DiffusionPipeline.fromPretrained(folder);
      expect(loaded).toBeInstanceOf(hf.FluxPipeline);
      const got = (await loaded.generate(call)).images as dt.Tensor;
      expect(await relativeError(got, want)).toBe(0);
      loaded.dispose();
      dt.dispose([got, want]);
      // a folder of another pipeline class is refused by FluxPipeline
      writeFileSync(join(folder, 'model_index.json'), JSON.stringify({ ...spec['model_index'], _class_name: 'StableDiffusion3Pipeline' }));
      await expect(hf.FluxPipeline.fromPretrained(folder)).rejects.toThrow(/is a StableDiffusion3Pipeline, not a FluxPipeline/);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
