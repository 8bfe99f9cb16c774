// Step caches (packages/hf/src/cache/) in the tiny Flux and SD3 pipelines against diffusers'
// hooks (tools/reference/make_cache_fixtures.py: the same pipelines under
// apply_first_block_cache at each case's threshold, apply_mag_cache with FLUX_MAG_RATIOS or
// calibrating, apply_taylorseer_cache with the case's config): every transformer call takes
// diffusers' decision (First-Block Cache: its statistic within 1e-3 of diffusers', the remaining
// blocks run or not as there; MagCache: every block skipped or not as there, a calibration's
// ratios within 1e-3; TaylorSeer: the attentions run in full or are predicted as there) and the
// final latents are within 2e-3 of
// diffusers', on one CPU device and on meshes
// that split the tokens ('ulysses'), the heads ('tp') and the guidance batch ('cfg'): the
// statistic is reduced over the split, so every mesh decides as one device. True CFG's two Flux
// branches keep a cache each ('cond', 'uncond'), also when a 'cfg' dim batches them (each half
// of the batch decides as its branch's call); SD3's batched branches one. A second generate
// starts afresh (the same decisions and latents as the first); the cache leaves no tensor behind;
// bad configs are DTorchErrors.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { DTorchError } from '@dtorch/common';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';
import { settleGarbage } from '../settle_garbage.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
const io = readSafetensorsHeader(join(fixtures, 'step-cache.safetensors'));

interface Call {
  context: string;
  statistic: number | null;
  computed: boolean;
}
interface Case {
  name: string;
  pipeline: 'tiny-flux' | 'tiny-sd3';
  prompt: string;
  negative_prompt?: string;
  true_cfg_scale?: number;
  height: number;
  width: number;
  num_inference_steps: number;
  seed: number;
  max_sequence_length: number;
  threshold?: number;
  config?: Record<string, number | string>;
  calls: Call[];
}
const cases = JSON.parse(readFileSync(join(fixtures, 'step-cache-cases.json'), 'utf8')) as Case[];
const byName = (name: string) => cases.find((c) => c.name === name)!;

type Pipe = hf.FluxPipeline | hf.StableDiffusion3Pipeline;
const make = (c: Case, mesh: dt.DeviceMesh): Promise<Pipe> => (c.pipeline === 'tiny-flux' ? hf.FluxPipeline.tiny({ mesh }) : hf.StableDiffusion3Pipeline.tiny({ mesh }));

// the case's cache as enableCache takes it (diffusers' TaylorSeerCacheConfig arguments, camelCase)
function cacheOf(c: Case): hf.CacheConfig {
  if (c.threshold !== undefined) return { kind: 'first-block', threshold: c.threshold };
  const camel = Object.fromEntries(Object.entries(c.config!).map(([k, v]) => [k.replace(/_([a-z])/g, (_, l: string) => l.toUpperCase()), v]));
  if (c.name.startsWith('mag')) return { kind: 'mag', ...camel, ...(!camel['calibrate'] && { magRatios: hf.FLUX_MAG_RATIOS }) } as hf.MagCacheConfig;
  return { kind: 'taylorseer', ...camel } as hf.TaylorSeerCacheConfig;
}

// the fixture script's arguments, camelCase
function optionsOf(c: Case) {
  return {
    prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, seed: c.seed, maxSequenceLength: c.max_sequence_length, outputType: 'latent' as const,
    ...(c.negative_prompt !== undefined ? { negativePrompt: c.negative_prompt } : {}),
    ...(c.true_cfg_scale !== undefined ? { trueCfgScale: c.true_cfg_scale } : {}),
  };
}

async function generate(pipe: Pipe, c: Case) {
  const out = await (pipe as hf.FluxPipeline).generate(optionsOf(c) as hf.FluxGenerateOptions);
  return { latents: out.images as dt.Tensor, cache: out.timings.cache! };
}

// diffusers' decisions, and (First-Block Cache) its statistics within 1e-3 (the thresholds lie ≥ 5% from every one)
function expectDecisions(got: hf.CacheReport, want: Case, what: string) {
  expect(got.decisions.map((d) => `${d.context}:${d.computed}`), `${what}: contexts and decisions`).toEqual(want.calls.map((d) => `${d.context}:${d.computed}`));
  for (const [i, d] of got.decisions.entries()) {
    const w = want.calls[i]!.statistic;
    if (w === null) expect(d.statistic, `${what}: call ${i} is its context's first`).toBeUndefined();
    else expect(Math.abs(d.statistic! - w), `${what}: call ${i}'s statistic ${d.statistic} against diffusers' ${w}`).toBeLessThanOrEqual(1e-3 * w);
  }
  expect(got.computed).toBe(want.calls.filter((d) => d.computed).length);
  if (!want.name.endsWith('calibrate')) expect(got.computed, `${what}: some calls reused the cache`).toBeLessThan(got.calls);
}

const meshes: { name: string; make: () => dt.DeviceMesh; cases: string[] }[] = [
  { name: '1 device', make: () => new dt.DeviceMesh('cpu', [0]), cases: ['flux', 'flux-cfg', 'sd3', 'mag-flux', 'mag-flux-cfg', 'mag-sd3', 'mag-calibrate', 'taylor-flux', 'taylor-flux-cfg', 'taylor-sd3'] },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), cases: ['flux', 'flux-cfg', 'sd3', 'mag-flux', 'mag-sd3', 'mag-calibrate', 'taylor-flux', 'taylor-sd3'] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), cases: ['flux', 'sd3', 'mag-flux', 'mag-sd3', 'taylor-flux', 'taylor-sd3'] },
  // Flux's true CFG batched over 'cfg': each half decides as its branch's own call
  { name: 'cfg=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['cfg']), cases: ['flux-cfg', 'sd3', 'mag-flux-cfg', 'mag-sd3', 'taylor-flux-cfg', 'taylor-sd3'] },
  { name: 'cfg=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['cfg', 'ulysses']), cases: ['flux-cfg', 'sd3', 'mag-flux-cfg', 'taylor-flux-cfg'] },
];

describe.each(meshes)('step caches on $name match diffusers', ({ name: meshName, make: makeMesh, cases: names }) => {
  it.each(names)('case %s: the same decisions and latents', async (name) => {
    const c = byName(name);
    const pipe = await make(c, makeMesh());
    pipe.transformer.enableCache(cacheOf(c));
    const batches = new Set<number>();
    const forward = pipe.transformer.forward.bind(pipe.transformer) as (x: dt.Tensor, o: never) => dt.Tensor;
    (pipe.transformer as { forward: unknown }).forward = (x: dt.Tensor, o: never) => (batches.add(x.shape[0]!), forward(x, o));
    await settleGarbage(); // earlier tests' dropped tensors collected now, not during the count
    const before = dt.memory().numTensors;
    const first = await generate(pipe, c);
    // SD3 batches its branches; Flux's true CFG is batched where a 'cfg' dim splits it, else two calls
    expect([...batches], 'the transformer\'s batch').toEqual([c.pipeline === 'tiny-sd3' || (c.true_cfg_scale !== undefined && meshName.startsWith('cfg')) ? 2 : 1]);
    expectDecisions(first.cache, c, `${meshName} ${name}`);
    expect(first.cache).toMatchObject({ kind: cacheOf(c).kind, config: cacheOf(c), calls: c.calls.length });
    await expectClose(first.latents, fixtureTensor(io, `${name}.latent`, { mesh: first.latents.mesh }), 2e-3, `${meshName} ${name} latents`);
    first.latents.dispose();
    await dt.sync();
    expect(dt.memory().numTensors, 'the cache keeps nothing after the call').toBe(before);
    if (meshName === '1 device') {
      // a second call starts afresh: what the first gave
      const second = await generate(pipe, c);
      expectDecisions(second.cache, c, `${name}, again`);
      await expectClose(second.latents, fixtureTensor(io, `${name}.latent`), 2e-3, `${name} latents, again`);
      second.latents.dispose();
    }
    pipe.dispose();
  });
});

describe('step caches', () => {
  it('changes nothing once disabled, and reports nothing', async () => {
    const c = byName('flux');
    const pipe = await hf.FluxPipeline.tiny();
    pipe.transformer.enableCache({ kind: 'first-block', threshold: c.threshold! });
    pipe.transformer.disableCache();
    expect(pipe.transformer.stepCache).toBeUndefined();
    // TaylorSeer hooks every attention of the blocks; disabling takes the hooks off
    pipe.transformer.enableCache({ kind: 'taylorseer' });
    const attentions = [...pipe.transformer.transformer_blocks, ...pipe.transformer.single_transformer_blocks].map((b) => b.attn);
    expect((pipe.transformer.stepCache as hf.TaylorSeerCache).modules).toEqual(attentions);
    expect(attentions.every((a) => Object.hasOwn(a, 'forward'))).toBe(true);
    pipe.transformer.disableCache();
    expect(attentions.some((a) => Object.hasOwn(a, 'forward')), 'no hook left').toBe(false);
    const out = await pipe.generate(optionsOf(c));
    expect(out.timings.cache).toBeUndefined();
    // threshold 0 computes every step: the uncached latents, which the cached run's are not
    pipe.transformer.enableCache({ kind: 'first-block', threshold: 0 });
    const all = await generate(pipe, c);
    expect(all.cache.computed).toBe(all.cache.calls);
    const cached = fixtureTensor(io, 'flux.latent');
    const diff = await dt.tidy(() => (out.images as dt.Tensor).sub(cached).abs().max()).item();
    expect(diff, 'the cached run skipped work that changes the result').toBeGreaterThan(1e-3);
    await expectClose(all.latents, out.images as dt.Tensor, 1e-6, 'threshold 0 against no cache');
    dt.dispose([all.latents, out.images as dt.Tensor]);
    pipe.dispose();
  });

  it('caches a transformer called directly, in its default context, and starts over at another size', async () => {
    const spec = hf.tinyPipelineSpec('tiny-flux');
    const model = new hf.FluxTransformer2DModel(hf.FluxTransformer2DConfig.fromDict(spec.transformer!));
    hf.fillRandomWeights(model, 5);
    model.enableCache({ kind: 'first-block', threshold: 1e9 }); // everything after the first call reused
    const c = model.config;
    const inputs = (tokens: number) => ({
      encoderHiddenStates: dt.randn([1, 4, c.jointAttentionDim], { seed: 1 }),
      pooledProjections: dt.randn([1, c.pooledProjectionDim], { seed: 2 }),
      timestep: 0.5,
      ...(c.guidanceEmbeds ? { guidance: 3.5 } : {}),
      imgIds: dt.zeros([tokens, c.axesDimsRope.length]),
      txtIds: dt.zeros([4, c.axesDimsRope.length]),
    });
    const x = dt.randn([1, 16, c.inChannels], { seed: 3 });
    const o = inputs(16);
    const a = model.call(x, o);
    const b = model.call(x.mul(1.5), o);
    expect(model.stepCache!.decisions.map((d) => d.computed)).toEqual([true, false]);
    const y = dt.randn([1, 8, c.inChannels], { seed: 4 });
    const o8 = inputs(8);
    const d = model.call(y, o8);
    expect(model.stepCache!.decisions.map((d) => d.computed), 'another size computes').toEqual([true, false, true]);
    // a reused call is the first block's output plus the tail residual of the computed one: with
    // the same input, the computed call's output again
    const again = model.call(y, o8);
    await expectClose(again, d, 1e-6, 'the reused call on the same input');
    expect(model.stepCache!.decisions.at(-1)!.computed).toBe(false);
    dt.dispose([a, b, d, again, x, y, ...Object.values(o), ...Object.values(o8)].filter((t): t is dt.Tensor => t instanceof dt.Tensor));
    model.dispose();
  });

  it("compares a bfloat16 model's statistic in bfloat16, as diffusers computes it", async () => {
    const spec = hf.tinyPipelineSpec('tiny-flux');
    const model = new hf.FluxTransformer2DModel(hf.FluxTransformer2DConfig.fromDict(spec.transformer!), { dtype: 'bfloat16' });
    hf.fillRandomWeights(model, 5);
    model.enableCache({ kind: 'first-block', threshold: 0 });
    const c = model.config;
    const o = {
      encoderHiddenStates: dt.randn([1, 4, c.jointAttentionDim], { seed: 1, dtype: 'bfloat16' }),
      pooledProjections: dt.randn([1, c.pooledProjectionDim], { seed: 2, dtype: 'bfloat16' }),
      timestep: 0.5,
      ...(c.guidanceEmbeds ? { guidance: 3.5 } : {}),
      imgIds: dt.zeros([16, c.axesDimsRope.length]),
      txtIds: dt.zeros([4, c.axesDimsRope.length]),
    };
    const outs = [1, 1.01, 1.5].map((s, i) => model.call(dt.randn([1, 16, c.inChannels], { seed: 3, dtype: 'bfloat16' }).mul(s + i * 0.001), o));
    const statistics = model.stepCache!.decisions.slice(1).map((d) => d.statistic!);
    expect(statistics).toHaveLength(2);
    // each a bfloat16: the low 16 bits of its float32 are zero
    for (const s of statistics) expect(new Uint32Array(new Float32Array([s]).buffer)[0]! & 0xffff, `${s} is a bfloat16`).toBe(0);
    expect(statistics[1]).toBeGreaterThan(statistics[0]!);
    dt.dispose([...outs, ...Object.values(o)].filter((t): t is dt.Tensor => t instanceof dt.Tensor));
    model.dispose();
  });

  it('refuses bad configs, a second cache and models it cannot cache, with DTorchErrors', () => {
    const spec = hf.tinyPipelineSpec('tiny-sd3');
    const model = new hf.SD3Transformer2DModel(hf.SD3Transformer2DConfig.fromDict(spec.transformer!));
    const refused = (config: unknown, part: string) => {
      const err = (() => {
        try {
          model.enableCache(config as hf.CacheConfig);
        } catch (e) {
          return e;
        }
      })();
      expect(err, part).toBeInstanceOf(DTorchError);
      expect((err as Error).message).toContain(part);
    };
    refused({ kind: 'fast' }, "one of 'first-block', 'taylorseer', 'mag'");
    refused({ kind: 'mag' }, 'magRatios');
    refused({ kind: 'mag', magRatios: [1, 'x'] }, 'config.magRatios');
    refused({ kind: 'mag', calibrate: 'yes' }, 'config.calibrate');
    refused({ kind: 'first-block', cacheInterval: 2 }, 'not cacheInterval');
    refused({ kind: 'taylorseer', cacheInterval: 0 }, 'config.cacheInterval');
    refused({ kind: 'taylorseer', maxOrder: 1.5 }, 'config.maxOrder');
    refused({ kind: 'taylorseer', taylorFactorsDtype: 'int8' }, 'config.taylorFactorsDtype');
    refused({ kind: 'first-block', threshold: -1 }, 'config.threshold');
    refused({ kind: 'first-block', threshold: Number.NaN }, 'config.threshold');
    refused(undefined, 'config.kind');
    model.enableCache({ kind: 'first-block' });
    expect(model.stepCache!.config, "diffusers' default").toEqual({ kind: 'first-block', threshold: 0.05 });
    refused({ kind: 'first-block' }, 'disableCache() first');
    model.disableCache();
    const warn = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    model.disableCache();
    expect(warn.mock.calls.flat().join()).toContain('no cache is enabled');
    warn.mockRestore();
    model.dispose();
    const one = new hf.SD3Transformer2DModel(hf.SD3Transformer2DConfig.fromDict({ ...spec.transformer!, num_layers: 1 }));
    expect(() => one.enableCache({ kind: 'first-block' })).toThrow(/a first block and a last one/);
    one.dispose();
  });

  it('reads the CLI spelling kind[:threshold]', () => {
    expect(hf.parseCacheConfig('first-block:0.12')).toEqual({ kind: 'first-block', threshold: 0.12 });
    expect(hf.parseCacheConfig('first-block')).toEqual({ kind: 'first-block', threshold: 0.05 });
    expect(hf.parseCacheConfig('taylorseer:4')).toEqual({ kind: 'taylorseer', cacheInterval: 4, disableCacheBeforeStep: 3, disableCacheAfterStep: undefined, maxOrder: 1, taylorFactorsDtype: 'bfloat16' });
    for (const bad of ['first-block:x', 'first-block:0.1:2', 'taylor:0.1', 'first-block:-1', 'taylorseer:0', 'taylorseer:2.5']) expect(() => hf.parseCacheConfig(bad), bad).toThrow(DTorchError);
  });
});
