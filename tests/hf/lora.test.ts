// LoRA adapters on the pipelines (DiffusionPipeline.loadLoraWeights, setAdapters, fuseLora, ...)
// against diffusers' own load_lora_weights on tiny-flux and tiny-sd3
// (tools/reference/make_lora_fixtures.py: the same random pipelines and adapter files): the
// final latents (or encode_prompt's outputs) within 2e-3 of the largest reference value, for
// one adapter in diffusers' layout (with its metadata's alphas and patterns), two at weights
// 0.8 / 0.5, a per-call loraScale, the same adapter written in kohya's, ComfyUI-BFL's and
// XLabs' layouts, CLIP's and T5's adapters, SD3's "style" in kohya's layout (which diffusers
// does not read: against sd3.style); on 1 CPU device, 'tp' 2 (A and B split as the weights),
// 'ulysses' 2, 'cfg' 2 and 'dp' 2. Fused equals unfused, unfuse gives back the same bits,
// unloading gives the memory back, and bad files and calls are DTorchErrors that leave the
// pipeline as it was.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { DTorchError } from '@dtorch/common';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { settleGarbage } from '../settle_garbage.js';
import { relativeError } from './expect_close.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/lora/', import.meta.url));
const references = readSafetensorsHeader(join(fixtures, 'references.safetensors'));

interface Case {
  pipeline: 'tiny-flux' | 'tiny-sd3';
  call: '__call__' | 'encode_prompt';
  output: 'prompt_embeds' | 'pooled_prompt_embeds' | null;
  args: Record<string, unknown>;
  seed: number | null;
  adapters: { file: string; adapter_name: string }[];
  set_adapters: { adapter_names: string[]; adapter_weights: number[] } | null;
  scale: number | null;
}
const cases = JSON.parse(readFileSync(join(fixtures, 'cases.json'), 'utf8')) as Record<string, Case>;

const TOLERANCE = 2e-3;
type Pipe = hf.FluxPipeline | hf.StableDiffusion3Pipeline;

// diffusers' __call__ arguments, camelCase
function generateOptions(c: Case): Record<string, unknown> {
  const a = c.args;
  const names: Record<string, string> = {
    prompt: 'prompt', negative_prompt: 'negativePrompt', height: 'height', width: 'width', num_inference_steps: 'numInferenceSteps',
    max_sequence_length: 'maxSequenceLength', true_cfg_scale: 'trueCfgScale', guidance_scale: 'guidanceScale',
  };
  const out: Record<string, unknown> = { outputType: 'latent', seed: c.seed };
  for (const [k, v] of Object.entries(a)) if (names[k]) out[names[k]] = v;
  if (c.scale !== null) out['loraScale'] = c.scale;
  return out;
}

// the modules diffusers loaded from each file (modules.json)
const loadedByDiffusers = JSON.parse(readFileSync(join(fixtures, 'modules.json'), 'utf8')) as Record<string, { loaded: { module: string }[] }>;

// Adapter `name` taken off the linears diffusers did not load from `file`: its kohya / BFL
// conversion leaves out the top-level modules (x_embedder, the time and text embedders,
// norm_out, proj_out), which DTorch's keeps (lora_formats.test.ts checks their deltas)
function asDiffusersLoaded(pipe: Pipe, file: string, name: string): void {
  const loaded = new Set(loadedByDiffusers[file]!.loaded.map((m) => m.module));
  for (const [component, model] of [['transformer', pipe.transformer]] as const) {
    for (const [path, m] of model.namedModules()) {
      const lora = m instanceof hf.nn.Linear ? hf.nn.linearLora(m) : undefined;
      if (lora?.names.includes(name) && !loaded.has(`${component}.${path}`)) lora.remove(name);
    }
  }
}

/** Loads the case's adapters, runs it, and returns its error against diffusers'; the adapters are unloaded after. */
async function caseError(pipe: Pipe, name: string): Promise<number> {
  const c = cases[name]!;
  for (const a of c.adapters) {
    await pipe.loadLoraWeights(join(fixtures, a.file), { adapterName: a.adapter_name });
    if (/kohya|bfl/.test(a.file)) asDiffusersLoaded(pipe, a.file, a.adapter_name);
  }
  try {
    if (c.set_adapters) pipe.setAdapters(c.set_adapters.adapter_names, c.set_adapters.adapter_weights);
    return await outputError(pipe, name);
  } finally {
    pipe.unloadLoraWeights();
  }
}

// the case's output as the pipeline gives it now, against the reference
async function outputError(pipe: Pipe, name: string): Promise<number> {
  const c = cases[name]!;
  let got: dt.Tensor;
  const extra: dt.Tensor[] = [];
  if (c.call === 'encode_prompt') {
    const out = await (pipe as hf.FluxPipeline).encodePrompt({ prompt: c.args['prompt'] as string, maxSequenceLength: c.args['max_sequence_length'] as number });
    got = c.output === 'pooled_prompt_embeds' ? out.pooledPromptEmbeds : out.promptEmbeds;
    extra.push(out.promptEmbeds, out.pooledPromptEmbeds, out.textIds);
  } else {
    got = (await pipe.generate(generateOptions(c) as unknown as hf.FluxGenerateOptions & { outputType: "latent" })).images;
    extra.push(got);
  }
  const want = fixtureTensor(references, name);
  try {
    return await relativeError(got.redistribute(got.placements.map(() => dt.Replicate())), want, name);
  } finally {
    dt.dispose([want, ...new Set(extra)]);
  }
}

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  flux: string[];
  sd3: string[];
}

const meshes: MeshCase[] = [
  {
    name: '1 cpu device',
    make: () => new dt.DeviceMesh('cpu', [0]),
    flux: [
      'flux.base', 'flux.style', 'flux.style_detail', 'flux.style_scale', 'flux.kohya', 'flux.bfl', 'flux.xlabs', 'flux.style.pooled', 'flux.style.prompt_embeds',
      'flux.cfg_style', 'flux.dp_style', 'flux.t5.prompt_embeds',
    ],
    sd3: ['sd3.base', 'sd3.style'],
  },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), flux: ['flux.style', 'flux.style_detail', 'flux.kohya', 'flux.style.pooled', 'flux.t5.prompt_embeds'], sd3: ['sd3.style'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), flux: ['flux.style', 'flux.xlabs', 'flux.cfg_style'], sd3: ['sd3.style'] },
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), flux: ['flux.cfg_style'], sd3: ['sd3.style'] },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), flux: ['flux.dp_style'], sd3: [] },
];

describe.each(meshes)('LoRA on $name matches diffusers', ({ make, flux, sd3 }) => {
  let fluxPipe: hf.FluxPipeline;
  let sd3Pipe: hf.StableDiffusion3Pipeline | undefined;
  beforeAll(async () => {
    const mesh = make();
    fluxPipe = await hf.FluxPipeline.tiny({ mesh });
    if (sd3.length) sd3Pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh });
  });
  afterAll(() => {
    fluxPipe.dispose();
    sd3Pipe?.dispose();
  });

  it.each(flux)('%s', async (name) => {
    expect(await caseError(fluxPipe, name)).toBeLessThanOrEqual(TOLERANCE);
  });
  it.each(sd3)('%s', async (name) => {
    expect(await caseError(sd3Pipe!, name)).toBeLessThanOrEqual(TOLERANCE);
  });
});

describe('LoRA adapters on tiny-sd3', () => {
  // kohya's (sd-scripts') SD3 layout, which diffusers' SD3 loader does not read: the "style" adapter
  // whole (make_sd3_lora_fixtures.py checks its deltas through diffusers' single-file converter,
  // and that its weights merged give sd3.style), so it must give sd3.style's latents
  const kohya = join(fixtures, 'sd3-style-kohya.safetensors');
  it.each([
    ['1 cpu device', () => new dt.DeviceMesh('cpu', [0])],
    ['tp=2', () => new dt.DeviceMesh('cpu', [0, 1], ['tp'])],
  ] as const)('reads a kohya / sd-scripts LoRA on %s as its diffusers-layout source', async (_, make) => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh: make() });
    try {
      expect(await pipe.loadLoraWeights(kohya, { adapterName: 'kohya' })).toBe('kohya');
      expect(pipe.getListAdapters()).toEqual({ transformer: ['kohya'], text_encoder: ['kohya'], text_encoder_2: ['kohya'] });
      expect(await outputError(pipe, 'sd3.style')).toBeLessThanOrEqual(TOLERANCE);
      pipe.unloadLoraWeights();
      // into the transformer alone (its own convertLora): the CLIPs' modules are left aside
      expect(await pipe.transformer.loadLoraAdapter(kohya, { adapterName: 'k' })).toBe('k');
      expect(pipe.getListAdapters()).toEqual({ transformer: ['k'] });
      pipe.transformer.unloadLora();
    } finally {
      pipe.dispose();
    }
  });
});

describe('LoRA adapters on tiny-flux', () => {
  let pipe: hf.FluxPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny();
  });
  afterAll(() => pipe.dispose());
  const style = join(fixtures, 'flux-style.safetensors');
  const detail = join(fixtures, 'flux-detail.safetensors');

  it('lists, weights, disables, enables and deletes adapters as diffusers does', async () => {
    expect(await pipe.loadLoraWeights(style)).toBe('default_0');
    expect(await pipe.loadLoraWeights(detail, { adapterName: 'detail' })).toBe('detail');
    expect(pipe.getListAdapters()).toEqual({ transformer: ['default_0', 'detail'], text_encoder: ['default_0'] });
    expect(pipe.getActiveAdapters()).toEqual(['default_0', 'detail']);
    // an adapter weighted 0 adds nothing: style alone
    pipe.setAdapters(['default_0', 'detail'], [1, 0]);
    expect(await outputError(pipe, 'flux.style')).toBeLessThanOrEqual(TOLERANCE);
    pipe.setAdapters('default_0');
    expect(pipe.getActiveAdapters()).toEqual(['default_0']);
    expect(await outputError(pipe, 'flux.style')).toBeLessThanOrEqual(TOLERANCE);
    pipe.disableLora();
    expect(pipe.getActiveAdapters()).toEqual([]);
    expect(await outputError(pipe, 'flux.base')).toBeLessThanOrEqual(TOLERANCE);
    pipe.enableLora();
    pipe.deleteAdapters('default_0');
    pipe.setAdapters('detail', 0);
    expect(pipe.getListAdapters()).toEqual({ transformer: ['detail'] });
    expect(await outputError(pipe, 'flux.base')).toBeLessThanOrEqual(TOLERANCE);
    pipe.unloadLoraWeights();
    expect(pipe.getListAdapters()).toEqual({});
  });

  it("loads into the transformer alone (diffusers' load_lora_adapter), with the model's own set / fuse / unload", async () => {
    const xlabs = join(fixtures, 'flux-xlabs.safetensors');
    expect(await pipe.transformer.loadLoraAdapter(xlabs, { adapterName: 'xlabs' })).toBe('xlabs');
    expect(pipe.getListAdapters()).toEqual({ transformer: ['xlabs'] });
    expect(await outputError(pipe, 'flux.xlabs')).toBeLessThanOrEqual(TOLERANCE);
    pipe.transformer.setAdapters('xlabs', 0);
    expect(await outputError(pipe, 'flux.base')).toBeLessThanOrEqual(TOLERANCE);
    pipe.transformer.setAdapters('xlabs');
    expect(pipe.transformer.fuseLora()).toBeGreaterThan(0);
    expect(await outputError(pipe, 'flux.xlabs')).toBeLessThanOrEqual(TOLERANCE);
    expect(pipe.transformer.unfuseLora()).toBeGreaterThan(0);
    pipe.transformer.unloadLora();
    expect(await outputError(pipe, 'flux.base')).toBeLessThanOrEqual(TOLERANCE);
    // a text encoder's modules are not the transformer's: left aside
    await pipe.transformer.loadLoraAdapter(join(fixtures, 'flux-style.safetensors'), { adapterName: 'style' });
    expect(pipe.getListAdapters()).toEqual({ transformer: ['style'] });
    pipe.transformer.unloadLora();
  });

  it('fused equals unfused, and unfuseLora gives back the same bits', async () => {
    const weightOf = async () => {
      const w = (await pipe.transformer.transformer_blocks.at(0).attn.to_q.weight.data()) as Float32Array;
      return Buffer.from(w.buffer, w.byteOffset, w.byteLength).toString('base64');
    };
    const before = await weightOf();
    await pipe.loadLoraWeights(style, { adapterName: 'style' });
    await pipe.loadLoraWeights(detail, { adapterName: 'detail' });
    pipe.setAdapters(['style', 'detail'], [0.8, 0.5]);
    expect(pipe.fuseLora()).toBeGreaterThan(0);
    expect(await weightOf()).not.toBe(before);
    expect(await outputError(pipe, 'flux.style_detail')).toBeLessThanOrEqual(TOLERANCE);
    expect(() => pipe.setAdapters('style'), 'fused adapters cannot be reweighted').toThrow(/unfuseLora\(\) first/);
    expect(pipe.unfuseLora()).toBeGreaterThan(0);
    expect(await weightOf()).toBe(before);
    expect(await outputError(pipe, 'flux.style_detail')).toBeLessThanOrEqual(TOLERANCE);
    // unloading after fusing keeps what was fused, as diffusers does
    pipe.setAdapters('style');
    pipe.fuseLora({ components: ['transformer', 'text_encoder'] });
    pipe.unloadLoraWeights();
    expect(pipe.getListAdapters()).toEqual({});
    expect(await outputError(pipe, 'flux.style')).toBeLessThanOrEqual(TOLERANCE);
    expect(await weightOf()).not.toBe(before);
  });

  it('gives the memory back once unloaded, and a long loop with adapters stays flat', async () => {
    const fresh = await hf.FluxPipeline.tiny();
    try {
      await settleGarbage();
      const before = dt.memory();
      await fresh.loadLoraWeights(style);
      await fresh.loadLoraWeights(detail);
      expect(dt.memory().numBytes).toBeGreaterThan(before.numBytes);
      // the linears that widen run beside their adapters (one matmul of [x | A x]), the others add a delta
      const wide = (path: string) => nn.linearLora(fresh.transformer.getSubmodule(path) as nn.Linear)?.wide() !== undefined;
      expect(['single_transformer_blocks.0.proj_mlp', 'transformer_blocks.0.ff.net.0.proj', 'transformer_blocks.0.norm1.linear'].map(wide)).toEqual([true, true, true]);
      expect(['single_transformer_blocks.0.proj_out', 'transformer_blocks.0.ff.net.2', 'transformer_blocks.0.attn.to_q'].map(wide)).toEqual([false, false, false]);
      const seen: string[] = [];
      await fresh.generate({
        prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 12, maxSequenceLength: 8, outputType: 'latent', seed: 0, loraScale: 0.7,
        onStep: ({ step }) => {
          if (step > 2) seen.push(`${dt.memory().numTensors}/${dt.memory().numBytes}`);
        },
      }).then((o) => o.images.dispose());
      expect(new Set(seen).size, 'the same live tensors and bytes after every step').toBe(1);
      fresh.unloadLoraWeights();
      await settleGarbage();
      expect(dt.memory()).toMatchObject({ numTensors: before.numTensors, numBytes: before.numBytes });
    } finally {
      fresh.dispose();
    }
  });

  it.each([false, true])('leaves nothing behind once the pipeline is disposed (fused %s): the adapters, the laid-wide and packed buffers go with it', async (fuse) => {
    await settleGarbage();
    const before = dt.memory();
    const fresh = await hf.FluxPipeline.tiny();
    await fresh.loadLoraWeights(style, { adapterName: 'style' });
    await fresh.loadLoraWeights(detail, { adapterName: 'detail' });
    fresh.setAdapters(['style', 'detail'], [0.8, 0.5]);
    if (fuse) fresh.fuseLora();
    await fresh
      .generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 2, maxSequenceLength: 8, outputType: 'latent', seed: 0 })
      .then((o) => o.images.dispose());
    fresh.dispose();
    await dt.sync();
    // no garbage collection in between: `fresh` is still referenced here, so what it held is
    // released by dispose() itself, or not at all
    expect(dt.memory()).toMatchObject({ numTensors: before.numTensors, numBytes: before.numBytes });
  });

  it('finds the file in a folder as diffusers does, and says what is wrong with bad files and calls', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-lora-'));
    try {
      copyFileSync(style, join(dir, 'pytorch_lora_weights.safetensors'));
      copyFileSync(detail, join(dir, 'detail.safetensors'));
      expect(await pipe.loadLoraWeights(dir, { adapterName: 'a' })).toBe('a');
      await expect(pipe.loadLoraWeights(dir, { adapterName: 'a' })).rejects.toThrow(/already; give another adapterName/);
      expect(await pipe.loadLoraWeights(dir, { weightName: 'detail.safetensors', adapterName: 'b' })).toBe('b');
      pipe.unloadLoraWeights();
      rmSync(join(dir, 'pytorch_lora_weights.safetensors'));
      copyFileSync(detail, join(dir, 'other.safetensors'));
      await expect(pipe.loadLoraWeights(dir)).rejects.toThrow(/several LoRA files.*weightName/);
      await expect(pipe.loadLoraWeights(join(dir, 'missing.safetensors'))).rejects.toThrow(/there is no file/);

      // a LoRA for another model: SD3's adapter into Flux
      const listed = JSON.stringify(pipe.getListAdapters());
      await expect(pipe.loadLoraWeights(join(fixtures, 'sd3-style.safetensors'))).rejects.toThrow(DTorchError);
      await expect(pipe.loadLoraWeights(join(fixtures, 'sd3-style.safetensors'))).rejects.toThrow(/strict: false/);
      expect(JSON.stringify(pipe.getListAdapters()), 'a failed load changes nothing').toBe(listed);

      // shapes that do not fit: lora_B of a wrong height
      const header = readSafetensorsHeader(detail);
      const key = [...header.tensors.keys()].find((k) => k.endsWith('to_q.lora_B.weight'))!;
      const bad = join(dir, 'bad.safetensors');
      const tensors: Record<string, dt.Tensor> = {};
      for (const k of header.tensors.keys()) tensors[k] = fixtureTensor(header, k);
      tensors[key] = dt.zeros([5, tensors[key]!.shape[1]!]);
      await hf.nn.saveSafetensors(bad, tensors);
      dt.dispose(Object.values(tensors));
      await expect(pipe.loadLoraWeights(bad)).rejects.toThrow(/to_q.*lora_B \[\d+, rank\].*got lora_A \[8, \d+\] and lora_B \[5, 8\]/);
      expect(pipe.getListAdapters()).toEqual({});

      // keys of no layout: an error, or left out with a warning
      const extra = join(dir, 'extra.safetensors');
      const more: Record<string, dt.Tensor> = {};
      for (const k of header.tensors.keys()) more[k] = fixtureTensor(header, k);
      more['transformer.not_a_module.weight'] = dt.zeros([2]);
      await hf.nn.saveSafetensors(extra, more);
      dt.dispose(Object.values(more));
      await expect(pipe.loadLoraWeights(extra)).rejects.toThrow(/not_a_module/);
      const warn = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        expect(await pipe.loadLoraWeights(extra, { strict: false, adapterName: 'loose' })).toBe('loose');
        expect(warn.mock.calls.flat().join('\n')).toMatch(/left out 1 key.*not_a_module/);
      } finally {
        warn.mockRestore();
      }
      pipe.unloadLoraWeights();

      // bad calls
      await pipe.loadLoraWeights(detail, { adapterName: 'detail' });
      expect(() => pipe.setAdapters('nope')).toThrow(/no LoRA adapter named "nope".*"detail"/);
      expect(() => pipe.setAdapters(['detail'], [1, 2])).toThrow(/one finite weight for every adapter/);
      expect(() => pipe.deleteAdapters('nope')).toThrow(/no LoRA adapter named "nope"/);
      expect(() => pipe.fuseLora({ components: ['unet'] })).toThrow(/not this pipeline's/);
      await expect(pipe.loadLoraWeights(detail, { strict: 'yes' as never })).rejects.toThrow(/strict must be true or false/);
      await expect(pipe.generate({ prompt: 'a', loraScale: Number.NaN })).rejects.toThrow(/loraScale/);
      const running = pipe.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 2, maxSequenceLength: 8, outputType: 'latent', seed: 0 });
      expect(() => pipe.setAdapters('detail', 0.5)).toThrow(/generate\(\) call\(s\) are waiting or running/);
      (await running).images.dispose();
      pipe.setAdapters('detail', 0.5);
      pipe.unloadLoraWeights();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
