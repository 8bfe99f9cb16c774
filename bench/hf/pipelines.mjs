#!/usr/bin/env node
// bench/hf: text to image end to end, FLUX.1-dev (28 steps, guidance 3.5 as an embedding, 512 T5
// tokens) and SD3-medium (28 steps, classifier-free guidance 7.0, 256 T5 tokens), both 1024x1024,
// at full size with random weights: DTorch's hf.FluxPipeline / hf.StableDiffusion3Pipeline built
// from components (nn.skipInit, then values made on the GPU: random_init.mjs) beside diffusers'
// own pipelines (pipelines.py: diffusers' and transformers' classes and inits) in one run, each
// side in a process of its own. Specs: pipelines.json (components name models.json entries).
// Tokenizers: the tiny pipelines' (CLIP's real vocabulary, a small T5 SentencePiece: with random
// weights the ids' meaning is moot; the padded lengths are the real ones), on both sides.
// FLUX.1-dev image to image (flux-dev-img2img: FluxImg2ImgPipeline, strength 0.6 of 28 steps, a
// random 1024² picture drawn from the same seed on both sides, as a [1, 3, H, W] tensor in [0, 1])
// adds the image's encoding as a phase (image_encode_s: diffusers' vae.encode; DTorch's prepareMs);
// FLUX.1-Kontext (flux-dev-kontext: FluxKontextPipeline, a 1024² reference beside the 1024² image) too.
// Per pipeline and side: seconds end to end (best of RUNS after a warm-up run, each waited for;
// the output a [1, 3, 1024, 1024] tensor in [0, 1], no PNG), the time of each phase (prompt
// encoding, the denoising loop, the VAE decode), the peak allocated GPU memory over the timed runs
// and what the components hold (and, from one more run, the peak above that in each phase); then a summary line with the ratios and whether the issue's
// target (<= 0.9x diffusers eager, peak <= diffusers') is met.
// CACHES (issue 46) adds step-cache runs after the uncached ones, on both sides with the same
// settings (DTorch's side first): "0.12" a First-Block Cache threshold, "steps=10" the threshold
// (bisected on DTorch's side) that computes 10 of the steps, "taylorseer:5" TaylorSeer with that
// cache interval (diffusers' other defaults); per entry the time (after a warm-up run), the
// transformer calls computed, each call's statistic, and the fidelity against the uncached run at
// the same seed (PSNR of the [0, 1] image, cosine of the final latents). QUANTIZE=fp8 runs DTorch's
// transformer with FP8 linears (PreTrainedModel.quantize), QUANTIZE_TEXT=1 its T5 encoder too (the
// summary then reports issue 44's FP8 end-to-end targets: time and peak memory); DIFFUSERS=0 leaves the diffusers side out
// (e.g. FP8 with caches, against DTorch's own uncached FP8 run).
//   DEVICE=cuda node bench/hf/pipelines.mjs
//   DEVICE=cuda PIPELINES=flux-dev CACHES=0.12,0.08,steps=14,steps=10,taylorseer:5 node bench/hf/pipelines.mjs
//   DEVICE=cpu SIZE=tiny node bench/hf/pipelines.mjs      (a check of the harness)
// OFFLOAD=model or OFFLOAD=group:N runs both sides with their weights in host memory: DTorch's
// enableModelCpuOffload / enableGroupOffload({ numBlocksPerGroup: N }), diffusers'
// enable_model_cpu_offload / apply_group_offloading(block_level, N, use_stream=True) on the
// transformer and text encoders (docs/offloading.md); the time and peak memory say what it costs.
// Env: PIPELINES (flux-dev,sd3-medium), RUNS (2), BUDGET_S (480), CACHES, QUANTIZE, QUANTIZE_TEXT, OFFLOAD, DIFFUSERS (1), DIFFUSERS_SRC, PYTHON.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { childRuns, diffusersPython } from './child_runs.mjs';
import { graphCounters } from './graph_counters.mjs';
import { pipelineSpecs as specs, randomPipeline } from './random_pipeline.mjs';

const self = fileURLToPath(import.meta.url);
const here = dirname(self);
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const size = process.env.SIZE ?? 'full';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const names = (process.env.PIPELINES ?? 'flux-dev,sd3-medium').split(',').filter(Boolean);
const runs = Number(process.env.RUNS ?? 2);
const caches = (process.env.CACHES ?? '').split(',').filter(Boolean);
const budgetS = Number(process.env.BUDGET_S ?? 480);
const quantize = process.env.QUANTIZE || undefined;
const quantizeText = process.env.QUANTIZE_TEXT === '1';
const offload = process.env.OFFLOAD || undefined;
if (offload !== undefined && !/^(model|group(:[1-9]\d*)?)$/.test(offload)) throw new Error(`pipelines: OFFLOAD must be model, group or group:N, not ${JSON.stringify(offload)}`);
const withDiffusers = process.env.DIFFUSERS !== '0';
const GIB = 1024 ** 3;
const bench = 'hf_pipeline';
dt.setCaptureStacks(false); // as under NODE_ENV=production

// The pipeline of `name` from components, and the generate() options of the issue's run.
async function build(name) {
  const mesh = new dt.DeviceMesh(device, [0]);
  const { pipe, call } = await randomPipeline(name, { mesh, dtype, tiny: size === 'tiny', quantize, quantizeText });
  const options = {
    prompt: call.prompt, height: call.height, width: call.width, numInferenceSteps: call.num_inference_steps,
    guidanceScale: call.guidance_scale, maxSequenceLength: call.max_sequence_length, seed: 0, outputType: 'tensor',
  };
  // image to image and Kontext: the picture as torch.rand(1, 3, H, W, generator=manual_seed(image_seed)) draws it
  if (call.image_seed !== undefined) options.image = dt.rand([1, 3, call.height, call.width], { seed: call.image_seed, mesh });
  if (call.strength !== undefined) options.strength = call.strength;
  if (call.max_area !== undefined) options.maxArea = call.max_area;
  if (call._auto_resize !== undefined) options.autoResize = call._auto_resize;
  return { pipe, options };
}

// DTorch's side of one pipeline (run in a worker process of its own).
async function measure(name) {
  const ms = (since) => Number(process.hrtime.bigint() - since) / 1e6;
  const start = process.hrtime.bigint();
  const { pipe, options } = await build(name);
  if (offload === 'model') await pipe.enableModelCpuOffload();
  else if (offload) await pipe.enableGroupOffload({ numBlocksPerGroup: Number(offload.split(':')[1] ?? 1) });
  await dt.sync();
  const buildS = ms(start) / 1000;
  const cuda = device === 'cuda';
  const held = cuda ? dt.cuda.memoryStats(0).allocatedBytes : null;
  const timed = [];
  let shape = null;
  let checksum = null;
  let reference = null; // the last uncached image, for the cached runs' fidelity
  for (let i = 0; i <= runs; i++) {
    if (i === 1 && cuda) dt.cuda.resetPeakMemoryStats(0); // the first run warms kernels and the allocator
    const t0 = process.hrtime.bigint();
    const out = await pipe.generate(options);
    await dt.sync();
    const total = ms(t0);
    const images = out.images;
    shape = [...images.shape];
    if (i === runs) checksum = await dt.tidy(() => images.mean()).item();
    if (i === runs && caches.length) reference = images;
    else images.dispose();
    timed.push({ s: total / 1000, ...out.timings });
  }
  const peak = cuda ? dt.cuda.memoryStats(0).peakAllocatedBytes : null;
  // one more run, untimed, for where the peak falls: encoding and the first step, the other
  // steps, the decode (onStep waits for the devices after each step)
  let phasePeaks = null;
  if (cuda) {
    const gib = () => +((dt.cuda.memoryStats(0).peakAllocatedBytes - held) / GIB).toFixed(3);
    const peaks = {};
    dt.cuda.resetPeakMemoryStats(0);
    const onStep = ({ step, steps }) => {
      if (step === 1) peaks.encode_and_first_step = gib();
      if (step === steps) peaks.other_steps = gib();
      if (step === 1 || step === steps) dt.cuda.resetPeakMemoryStats(0);
    };
    const out = await pipe.generate({ ...options, onStep });
    await dt.sync();
    peaks.decode = gib();
    out.images.dispose();
    phasePeaks = peaks;
  }
  const graphs = graphCounters(); // over every run, before the pipeline's tensors go
  const cached = caches.length ? await cachedRuns(pipe, options, reference) : undefined;
  reference?.dispose();
  options.image?.dispose();
  pipe.dispose();
  const best = timed.slice(1).sort((a, b) => a.s - b.s)[0];
  const r3 = (v) => +v.toFixed(3);
  return {
    bench, pipeline: name, side: 'dtorch', device, dtype, size, ...(quantize && { quantize }), seconds: r3(best.s), runs_s: timed.slice(1).map((t) => r3(t.s)), warmup_s: r3(timed[0].s),
    encode_s: r3(best.encodeMs / 1000), image_encode_s: r3(best.prepareMs / 1000), denoise_s: r3(best.denoiseMs / 1000), decode_s: r3(best.decodeMs / 1000),
    peak_gib: peak === null ? null : r3(peak / GIB), held_gib: held === null ? null : r3(held / GIB), peak_above_held_gib_by_phase: phasePeaks,
    shape, finite: Number.isFinite(checksum), checksum, build_s: +buildS.toFixed(1), steps: options.numInferenceSteps,
    graphs, ...(cached && { caches: cached }),
  };
}

// First-Block Cache at each CACHES entry: time, calls computed, statistics, fidelity (see the file's comment).
async function cachedRuns(pipe, options, referenceImage) {
  const ms = (since) => Number(process.hrtime.bigint() - since) / 1e6;
  const latentOf = async () => (await pipe.generate({ ...options, outputType: 'latent' })).images;
  const referenceLatents = await latentOf();
  const results = [];
  for (const entry of caches) {
    const config = entry.startsWith('taylorseer')
      ? hf.parseCacheConfig(entry)
      : { kind: 'first-block', threshold: entry.startsWith('steps=') ? await thresholdComputing(pipe, options, Number(entry.slice('steps='.length))) : Number(entry) };
    pipe.transformer.enableCache(config);
    let timed;
    let graphsBefore;
    for (let i = 0; i < 2; i++) {
      if (i === 1) graphsBefore = graphCounters(); // the timed run's captures and replays
      const t0 = process.hrtime.bigint();
      const out = await pipe.generate(options);
      await dt.sync();
      if (timed) timed.images.dispose();
      timed = { s: ms(t0) / 1000, images: out.images, timings: out.timings };
    }
    const latents = await latentOf();
    pipe.transformer.disableCache();
    const fidelity = await dt.tidy(() => {
      const mse = timed.images.sub(referenceImage).square().mean();
      const [a, b] = [latents.flatten().to('float32'), referenceLatents.flatten().to('float32')];
      return dt.stack([mse, a.mul(b).sum().div(a.square().sum().sqrt().mul(b.square().sum().sqrt()))]);
    }).data();
    const report = timed.timings.cache;
    results.push({
      cache: entry, config: config.kind === 'first-block' ? { ...config, threshold: +config.threshold.toPrecision(6) } : config, seconds: +timed.s.toFixed(3), denoise_s: +(timed.timings.denoiseMs / 1000).toFixed(3),
      calls: report.calls, computed: report.computed, psnr_db: +(10 * Math.log10(1 / fidelity[0])).toFixed(2), latent_cosine: +fidelity[1].toFixed(5),
      statistics: report.decisions.map((d) => (d.statistic === undefined ? null : +d.statistic.toPrecision(4))),
      graphs: Object.fromEntries(Object.entries(graphCounters()).map(([k, v]) => [k, +(v - graphsBefore[k]).toFixed(3)])),
    });
    dt.dispose([timed.images, latents]);
  }
  referenceLatents.dispose();
  return results;
}

// The threshold whose run computes `want` transformer calls: bisected between 0 and the largest
// statistic of a run that computes every call (the count falls as the threshold rises).
async function thresholdComputing(pipe, options, want) {
  const computed = async (threshold) => {
    pipe.transformer.enableCache({ kind: 'first-block', threshold });
    const out = await pipe.generate({ ...options, outputType: 'latent' });
    out.images.dispose();
    pipe.transformer.disableCache();
    return out.timings.cache;
  };
  const all = await computed(0);
  let [lo, hi] = [0, Math.max(...all.decisions.map((d) => d.statistic ?? 0)) * 1.001];
  let best = { threshold: hi, miss: Infinity };
  for (let i = 0; i < 10; i++) {
    const mid = (lo + hi) / 2;
    const n = (await computed(mid)).computed;
    if (Math.abs(n - want) < best.miss) best = { threshold: mid, miss: Math.abs(n - want) };
    if (n === want) break;
    if (n > want) lo = mid;
    else hi = mid;
  }
  return best.threshold;
}

// ---- the run: each side of each pipeline in a process of its own -----------------------------

const children = childRuns(budgetS, { bench, device, size });
const { left, run: child } = children;

function diffusers(name, settings = []) {
  const { python, env } = diffusersPython(root);
  const tokenizers = dirname(hf.tinyTokenizerFolder('clip'));
  hf.tinyTokenizerFolder('t5');
  return child(python, ['-W', 'ignore', join(here, 'pipelines.py'), '--pipelines', name, '--tokenizers', tokenizers, '--device', device, '--size', size, '--runs', String(runs), ...(settings.length ? ['--caches', settings.join(',')] : []), ...(offload ? ['--offload', offload] : [])], env, { side: 'diffusers_eager', pipeline: name });
}

function summary(name, lines) {
  const ours = lines.find((l) => l.pipeline === name && l.side === 'dtorch' && l.seconds !== undefined);
  const theirs = lines.find((l) => l.pipeline === name && l.side === 'diffusers_eager' && l.seconds !== undefined);
  const ratio = (a, b) => (a != null && b ? +(a / b).toFixed(3) : null);
  const full = size === 'full' && device === 'cuda';
  const target = full ? specs[name].target : {};
  const fp8Target = specs[name].fp8_target;
  const r = ratio(ours?.seconds, theirs?.seconds);
  return {
    bench, summary: true, pipeline: name, device, dtype, size, ...(quantize && { quantize }), ...(offload && { offload }), dtorch_s: ours?.seconds ?? null, diffusers_eager_s: theirs?.seconds ?? null, ratio_vs_eager: r,
    phases_dtorch_s: ours ? { encode: ours.encode_s, image_encode: ours.image_encode_s, denoise: ours.denoise_s, decode: ours.decode_s } : null,
    phases_diffusers_s: theirs ? { encode: theirs.encode_s, image_encode: theirs.image_encode_s, denoise: theirs.denoise_s, decode: theirs.decode_s } : null,
    dtorch_peak_gib: ours?.peak_gib ?? null, diffusers_peak_gib: theirs?.peak_gib ?? null, peak_ratio: ratio(ours?.peak_gib, theirs?.peak_gib),
    target_ratio: target.ratio_vs_eager ?? null, target_met: full && r !== null ? r <= target.ratio_vs_eager && (ours.peak_gib ?? 0) <= (theirs.peak_gib ?? Infinity) : null,
    issue_diffusers_eager_s: specs[name].issue?.diffusers_eager_s ?? null,
    // issue 44's FP8 targets (pipelines.json fp8_target): the end-to-end time and peak on one GPU
    ...(quantize === 'fp8' && !offload && fp8Target && {
      quantized: quantizeText ? 'transformer+t5' : 'transformer', fp8_target: fp8Target,
      fp8_target_s_met: full && ours?.seconds != null ? ours.seconds <= fp8Target.end_to_end_s : null,
      fp8_target_peak_met: full && ours?.peak_gib != null && fp8Target.peak_gib != null ? ours.peak_gib <= fp8Target.peak_gib : null,
    }),
    // issue 44's offloading targets: at most 0.8x diffusers' offloading time, the peak under 24
    // and 16 GiB in bfloat16, under 12 GiB with FP8 linears
    ...(offload && {
      offload_target_ratio: 0.8, offload_ratio_met: full && r !== null ? r <= 0.8 : null,
      peak_targets: (quantize === 'fp8' ? [12] : [24, 16]).map((gib) => ({ under_gib: gib, met: full && ours?.peak_gib != null ? ours.peak_gib < gib : null })),
    }),
    errors: lines.filter((l) => l.pipeline === name && l.error).map((l) => `${l.side}: ${l.error}`),
    ...(ours?.caches && { caches: ours.caches.map((c, i) => cacheSummary(c, theirs?.caches?.[i], ours.seconds)) }),
  };
}

// one cache entry of both sides: times, calls computed (equal when both decide alike), fidelity
function cacheSummary(ours, theirs, uncachedS) {
  return {
    cache: ours.cache, config: ours.config, dtorch_s: ours.seconds, diffusers_s: theirs?.seconds ?? null, ratio_vs_diffusers: theirs ? +(ours.seconds / theirs.seconds).toFixed(3) : null,
    speedup_vs_uncached: +(uncachedS / ours.seconds).toFixed(3), computed: `${ours.computed}/${ours.calls}`, diffusers_computed: theirs ? `${theirs.computed}/${theirs.calls}` : null,
    psnr_db: ours.psnr_db, latent_cosine: ours.latent_cosine, diffusers_psnr_db: theirs?.psnr_db ?? null,
  };
}

async function main() {
  const lines = [];
  const emit = (ls) => ls.forEach((l) => (lines.push(l), console.log(JSON.stringify(l))));
  for (const name of names) {
    if (!specs[name]) throw new Error(`pipelines: no pipeline "${name}" in pipelines.json`);
    const ours = () => left() > 20 && emit(child(process.execPath, [self], { PIPELINE_WORKER: name }, { side: 'dtorch', pipeline: name }));
    if (caches.length) ours(); // the diffusers side runs the thresholds DTorch's side settled on
    // each entry as the diffusers side reads it: first-block:THRESHOLD or taylorseer:INTERVAL
    const settings = lines.find((l) => l.pipeline === name && l.side === 'dtorch')?.caches?.map(({ config: c }) => (c.kind === 'first-block' ? `first-block:${c.threshold}` : `taylorseer:${c.cacheInterval}`)) ?? [];
    if (withDiffusers && left() > 30) emit(diffusers(name, settings));
    if (!caches.length) ours();
  }
  for (const name of names) emit([summary(name, lines)]);
  console.log(JSON.stringify({ bench, done: true, device, size, pipelines: names, wall_s: +children.elapsedS().toFixed(1) }));
}

if (process.env.PIPELINE_WORKER) {
  const name = process.env.PIPELINE_WORKER;
  try {
    console.log(JSON.stringify(await measure(name)));
  } catch (err) {
    console.log(JSON.stringify({ bench, side: 'dtorch', pipeline: name, device, dtype, size, error: String(err?.message ?? err).slice(0, 400) }));
    process.exitCode = 1;
  }
} else {
  await main();
}
