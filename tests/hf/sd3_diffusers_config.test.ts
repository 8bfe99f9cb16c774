// StableDiffusion3Pipeline in the configuration of diffusers' own fast test
// (test_pipeline_stable_diffusion_3.py, get_dummy_components / get_dummy_inputs): two CLIPs of
// hidden 32 beside a T5 of width 32, so the CLIPs' 64 channels together are cropped to T5's 32
// (diffusers pads with F.pad, and a negative pad crops; the pooled output keeps both CLIPs' 64).
// Against diffusers' pipeline with the same configs and fillRandomWeights seeds
// (tools/reference/make_sd3_pipeline_fixtures.py, sd3-diffusers-test.*): encodePrompt, the
// latents and the images after two steps of guidance 5, on one CPU device and on cfg=2, within
// 2e-3 of the largest reference value, as the tiny-sd3 cases.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';

const fixtures = (name: string) => fileURLToPath(new URL(`../fixtures/hf/pipelines/${name}`, import.meta.url));
const io = readSafetensorsHeader(fixtures('sd3-diffusers-test.safetensors'));
const { spec, case: c } = JSON.parse(readFileSync(fixtures('sd3-diffusers-test.json'), 'utf8')) as {
  spec: hf.TinyPipelineSpec;
  case: { prompt: string; num_inference_steps: number; guidance_scale: number; seed: number };
};

const TOLERANCE = 2e-3;

async function pipeline(mesh: dt.DeviceMesh): Promise<hf.StableDiffusion3Pipeline> {
  const random = <M extends hf.nn.Module>(name: string, make: () => M, options?: { initialize?: boolean }) => hf.randomModel(make, spec.seeds[name]!, options);
  const clip = (name: string) => random(name, () => new hf.CLIPTextModelWithProjection(hf.CLIPTextConfig.fromDict(spec[name]!), { mesh }));
  return new hf.StableDiffusion3Pipeline({
    scheduler: hf.FlowMatchEulerDiscreteScheduler.fromConfig(spec['scheduler']!),
    textEncoder: clip('text_encoder'),
    tokenizer: await hf.tinyTokenizer(spec.tokenizers['tokenizer']!),
    textEncoder2: clip('text_encoder_2'),
    tokenizer2: await hf.tinyTokenizer(spec.tokenizers['tokenizer_2']!),
    textEncoder3: random('text_encoder_3', () => new hf.T5EncoderModel(hf.T5Config.fromDict(spec['text_encoder_3']!), { mesh })),
    tokenizer3: await hf.tinyTokenizer(spec.tokenizers['tokenizer_3']!),
    // SD3's pos_embed table is computed at construction
    transformer: random('transformer', () => new hf.SD3Transformer2DModel(hf.SD3Transformer2DConfig.fromDict(spec['transformer']!), { mesh }), { initialize: true }),
    vae: random('vae', () => new hf.AutoencoderKL(hf.AutoencoderKLConfig.fromDict(spec['vae']!), { mesh })),
  });
}

const reference = (key: string, mesh: dt.DeviceMesh) => fixtureTensor(io, key, { mesh });

describe("StableDiffusion3Pipeline in diffusers' fast-test configuration", () => {
  it('encodePrompt crops the CLIPs\' 64 channels to T5\'s 32, as encode_prompt', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const pipe = await pipeline(mesh);
    const e = await pipe.encodePrompt({ prompt: c.prompt });
    expect(e.promptEmbeds.shape).toEqual([1, 77 + 256, 32]);
    expect(e.pooledPromptEmbeds.shape).toEqual([1, 64]);
    await expectClose(e.promptEmbeds, reference('prompt_embeds', mesh), TOLERANCE, 'prompt_embeds');
    await expectClose(e.pooledPromptEmbeds, reference('pooled_prompt_embeds', mesh), TOLERANCE, 'pooled_prompt_embeds');
    await expectClose(e.negativePromptEmbeds!, reference('negative_prompt_embeds', mesh), TOLERANCE, 'negative_prompt_embeds');
    await expectClose(e.negativePooledPromptEmbeds!, reference('negative_pooled_prompt_embeds', mesh), TOLERANCE, 'negative_pooled_prompt_embeds');
    dt.dispose(e);
    pipe.dispose();
  });

  it.each([
    { name: '1 device', make: () => new dt.DeviceMesh('cpu', [0]), split: 'R' },
    { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), split: 'S(0)' },
  ])('on $name: the latents and images of diffusers\' pipeline', async ({ make, split }) => {
    const mesh = make();
    const pipe = await pipeline(mesh);
    const seen = new Set<string>();
    const forward = pipe.transformer.forward.bind(pipe.transformer);
    pipe.transformer.forward = (x, o) => {
      seen.add(x.placements.map(String).join());
      return forward(x, o);
    };
    const options = { prompt: c.prompt, numInferenceSteps: c.num_inference_steps, guidanceScale: c.guidance_scale, seed: c.seed };
    const latents = (await pipe.generate({ ...options, outputType: 'latent' })).images as dt.Tensor;
    expect([...seen], 'the guidance batch over cfg').toEqual([split]);
    await expectClose(latents, reference('latents', mesh), TOLERANCE, 'latents');
    const images = (await pipe.generate({ ...options, outputType: 'tensor' })).images as dt.Tensor;
    await expectClose(images, reference('images', mesh), TOLERANCE, 'images');
    dt.dispose([latents, images]);
    pipe.dispose();
  });
});
