// FP8 pipelines (fromPretrained / tiny() with { quantize: 'fp8' }) against diffusers' pipelines
// with the same recipe (tools/reference/make_fp8_fixtures.py: the transformer's block linears,
// and T5's for flux.t5, run as PyTorch's casts compute torchao's row-wise float8): the final
// latents within 2e-3 of the largest reference value, on 1 CPU device and on meshes ('tp' 2: the
// row-parallel linears quantize each rank's columns with the whole row's amax; 'ulysses' 2; 'cfg'
// 2). Also: which linears the rule quantizes, that quantizing changes the result (the test
// cannot pass on float weights), LoRA beside FP8 weights (fused requantizes, unfuse gives the same
// bits back), and bad options.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { DTorchError } from '@dtorch/common';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { relativeError } from './expect_close.js';

const references = readSafetensorsHeader(fileURLToPath(new URL('../fixtures/fp8/tiny-pipelines.safetensors', import.meta.url)));
const loraFile = fileURLToPath(new URL('../fixtures/hf/lora/flux-style.safetensors', import.meta.url));
const TOLERANCE = 2e-3;
const FLUX = { prompt: 'a photo of a cat', height: 32, width: 32, numInferenceSteps: 2, maxSequenceLength: 8, seed: 0, outputType: 'latent' } as const;
const SD3 = { ...FLUX, negativePrompt: 'blurry', guidanceScale: 5 } as const;

async function latents(pipe: hf.FluxPipeline | hf.StableDiffusion3Pipeline, options: Record<string, unknown>): Promise<dt.Tensor> {
  const { images } = await pipe.generate(options as unknown as hf.FluxGenerateOptions & { outputType: 'latent' });
  return images.redistribute(images.placements.map(() => dt.Replicate()));
}

async function errorAgainst(got: dt.Tensor, name: string): Promise<number> {
  const want = fixtureTensor(references, name);
  try {
    return await relativeError(got, want, name);
  } finally {
    dt.dispose([got, want]);
  }
}

const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), sd3: true },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), sd3: true },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), sd3: false },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), sd3: true },
];

describe.each(meshes)('FP8 tiny pipelines on $name match diffusers with the same recipe', ({ make, sd3 }) => {
  let mesh: dt.DeviceMesh;
  beforeAll(() => {
    mesh = make();
  });
  it('flux: the transformer in FP8', async () => {
    const pipe = await hf.FluxPipeline.tiny({ mesh, quantize: 'fp8' });
    try {
      // single blocks run q/k/v and proj_mlp as one FP8 matmul where their weights are whole (not under 'tp')
      const packs = [...pipe.transformer.single_transformer_blocks].map((b) => (b as hf.FluxSingleTransformerBlock).packsFp8Inputs);
      expect(new Set(packs)).toEqual(new Set([!mesh.dimNames?.includes('tp')]));
      expect(await errorAgainst(await latents(pipe, FLUX), 'flux.latent')).toBeLessThanOrEqual(TOLERANCE);
    } finally {
      pipe.dispose();
    }
  });
  it('flux: the transformer and T5 in FP8', async () => {
    const pipe = await hf.FluxPipeline.tiny({ mesh, quantize: { transformer: 'fp8', text_encoder_2: 'fp8' } });
    try {
      expect(await errorAgainst(await latents(pipe, FLUX), 'flux.t5.latent')).toBeLessThanOrEqual(TOLERANCE);
    } finally {
      pipe.dispose();
    }
  });
  it.runIf(sd3)('sd3: the transformer in FP8, with CFG', async () => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh, quantize: 'fp8' });
    try {
      expect(await errorAgainst(await latents(pipe, SD3), 'sd3.latent')).toBeLessThanOrEqual(TOLERANCE);
    } finally {
      pipe.dispose();
    }
  });
});

describe('FP8 weights on tiny-flux', () => {
  let pipe: hf.FluxPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0]), quantize: 'fp8' });
  });
  afterAll(() => pipe.dispose());

  it("quantizes the blocks' linears, not the embedders, the final projection or the adaLN linears", () => {
    const fp8 = [...pipe.transformer.namedModules()].filter(([, m]) => m instanceof hf.nn.Linear && m.weight_scale).map(([p]) => p);
    expect(fp8).toContain('transformer_blocks.0.attn.to_q');
    expect(fp8).toContain('transformer_blocks.0.ff.net.2');
    expect(fp8).toContain('single_transformer_blocks.1.proj_out');
    for (const kept of ['x_embedder', 'context_embedder', 'proj_out', 'norm_out.linear', 'transformer_blocks.0.norm1.linear', 'single_transformer_blocks.0.norm.linear']) {
      expect(fp8).not.toContain(kept);
    }
    const w = pipe.transformer.transformer_blocks.at(0).attn.to_q.weight;
    expect(w.dtype).toBe('float8_e4m3fn');
  });

  it("runs an MLP's GELU in its FP8 output linear's quantizing pass (gelu_fp8_linear)", async () => {
    const ff = pipe.transformer.transformer_blocks.at(0).ff;
    const [act, , out] = [...ff.net] as [hf.GELUProjection, hf.nn.Dropout, hf.nn.Linear];
    expect(out.weight.dtype).toBe('float8_e4m3fn');
    const x = dt.randn([1, 6, act.proj.inFeatures], { seed: 3, mesh: pipe.mesh });
    const kernelsRun = () => dt.workers().reduce((n, w) => n + w.kernelsRun, 0);
    // kernels and value of `f` in a step of its own, inside a tidy the step ends before
    const run = async (f: () => dt.Tensor) => {
      await dt.sync();
      const start = kernelsRun();
      const y = dt.tidy(() => dt.keep(dt.graph.step(f)));
      await dt.sync();
      const kernels = kernelsRun() - start;
      const value = await y.data();
      y.dispose();
      return { kernels, value };
    };
    // call() frees the GELU's output at once: it dies at the FP8 linear, in the step
    const called = await run(() => ff.call(x));
    // the same modules with the GELU's output held to the tidy's end, after the step
    const held = await run(() => out.forward(act.forward(x)));
    expect(called.kernels).toBe(held.kernels - 1);
    expect(called.value).toEqual(held.value);
    x.dispose();
  });

  it("runs a single block's q/k/v and proj_mlp as one FP8 matmul, over the tokens its norm quantizes once", async () => {
    const model = pipe.transformer;
    const block = model.single_transformer_blocks.at(0);
    expect(block.packsFp8Inputs).toBe(true);
    const dim = block.proj_mlp.inFeatures;
    const tokens = 6;
    const joint = dt.randn([1, tokens, dim], { seed: 4, mesh: pipe.mesh }).to('float32');
    const temb = dt.randn([1, dim], { seed: 5, mesh: pipe.mesh });
    const rotary = [dt.randn([tokens, block.attn.headDim], { seed: 6, mesh: pipe.mesh }), dt.randn([tokens, block.attn.headDim], { seed: 7, mesh: pipe.mesh })] as const;
    const kernelsRun = () => dt.workers().reduce((n, w) => n + w.kernelsRun, 0);
    const run = async () => {
      await dt.sync();
      const start = kernelsRun();
      const y = dt.tidy(() => dt.keep(dt.graph.step(() => block.call(joint, temb, rotary))));
      await dt.sync();
      const kernels = kernelsRun() - start;
      const value = (await y.data()) as Float32Array;
      y.dispose();
      return { kernels, value };
    };
    // each layout's second call counted (a first call after other work may run more)
    await run();
    const packed = await run();
    // proj_mlp's weight replaced by an equal copy, q/k/v packed on their own: the layout float
    // weights have (q/k/v's product, then proj_mlp's, each quantizing the normed tokens)
    const mlp = block.proj_mlp;
    mlp.setTensor('weight', mlp.weight.clone());
    expect(block.packsFp8Inputs).toBe(false);
    expect(block.attn.packProjections()).toBe(1);
    await run();
    const apart = await run();
    expect(model.packProjections()).toBeGreaterThan(0);
    expect(block.packsFp8Inputs).toBe(true);
    // one product fewer, and the norm's kernel writes the FP8 rows the one product reads
    expect(packed.kernels).toBe(apart.kernels - 2);
    expect(packed.value).toEqual(apart.value);
    expect(packed.value.some((v) => v !== 0)).toBe(true);
    dt.dispose([joint, temb, ...rotary]);
  });

  it('gives another result than the float weights (the recipe is not a no-op)', async () => {
    const float = await hf.FluxPipeline.tiny({ mesh: pipe.mesh });
    try {
      const a = await latents(float, FLUX);
      const b = await latents(pipe, FLUX);
      expect(await relativeError(a, b)).toBeGreaterThan(3 * TOLERANCE);
      dt.dispose([a, b]);
    } finally {
      float.dispose();
    }
  });

  it('runs LoRA adapters beside FP8 weights; fusing requantizes, unfusing gives the same bits back', async () => {
    const toQ = pipe.transformer.transformer_blocks.at(0).attn.to_q;
    const before = [await toQ.weight.data(), await toQ.weight_scale!.data()];
    const base = await latents(pipe, FLUX);
    await pipe.loadLoraWeights(loraFile, { adapterName: 'style' });
    try {
      const unfused = await latents(pipe, FLUX);
      expect(await relativeError(unfused, base)).toBeGreaterThan(3 * TOLERANCE);
      pipe.fuseLora();
      expect(toQ.weight.dtype).toBe('float8_e4m3fn');
      const fused = await latents(pipe, FLUX);
      // the fused weight is quantized again: within FP8's rounding of the unfused result
      expect(await relativeError(fused, unfused)).toBeLessThanOrEqual(5e-2);
      pipe.unfuseLora();
      expect([await toQ.weight.data(), await toQ.weight_scale!.data()]).toEqual(before);
      dt.dispose([unfused, fused]);
    } finally {
      pipe.unloadLoraWeights();
      base.dispose();
    }
  });

  it('refuses an unknown quantization and a component the pipeline lacks', async () => {
    const mesh = pipe.mesh;
    await expect(hf.FluxPipeline.tiny({ mesh, quantize: 'int4' as never })).rejects.toThrow(/unknown quantization "int4"; the one there is: 'fp8'/);
    await expect(hf.FluxPipeline.tiny({ mesh, quantize: { unet: 'fp8' } })).rejects.toThrow(DTorchError);
    await expect(hf.FluxPipeline.tiny({ mesh, quantize: { unet: 'fp8' } })).rejects.toThrow(/"unet" is not one of this pipeline's models/);
  });
});
