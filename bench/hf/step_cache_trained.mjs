#!/usr/bin/env node
// bench/hf: step caches on the trained built-in pipeline (shapes-flux: FLUX.1-dev's architecture
// trained on drawn shapes, 128², 20 steps, true CFG 4), where skipping means what it means on
// trained weights (random weights change from step to step as trained ones do not). Per cache
// setting: the transformer calls whose cached work ran, the time, and the fidelity of each
// prompt's image against the uncached image at the same seed (PSNR of [0, 1] pixels; mean and
// worst over the prompts). MagCache uses the ratios a calibrating run measures on this model.
// One JSON line per setting, then a summary line.
//   node bench/hf/step_cache_trained.mjs                (CPU: DEVICE=cpu; DEVICE=cuda on a GPU)
// Env: DEVICE (cpu), PROMPTS (how many of the list, 4).
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const device = process.env.DEVICE ?? 'cpu';
const bench = 'hf_step_cache_trained';
const prompts = [
  'a large red circle at the top left on a blue background',
  'a small yellow square at the bottom right and a large green triangle at the top on a black background',
  'a large white star at the center on a purple background',
  'a small blue circle at the left and a small orange square at the right on a white background',
].slice(0, Number(process.env.PROMPTS ?? 4));
const settings = [
  { kind: 'first-block', threshold: 0.05 },
  { kind: 'first-block', threshold: 0.08 },
  { kind: 'first-block', threshold: 0.12 },
  { kind: 'first-block', threshold: 0.2 },
  { kind: 'taylorseer', cacheInterval: 2 },
  { kind: 'taylorseer', cacheInterval: 3 },
  { kind: 'taylorseer' },
  { kind: 'mag', threshold: 0.06 },
  { kind: 'mag', threshold: 0.12 },
  { kind: 'mag', threshold: 0.24 },
];

const trained = hf.registry.trainedPipelines['shapes-flux'];
const mesh = new dt.DeviceMesh(device, [0]);
const pipe = await hf.DiffusionPipeline.fromPretrained(await trained.folder(), { mesh, dtype: device === 'cuda' ? 'bfloat16' : 'float32' });
const options = { ...trained.defaults, seed: 0, outputType: 'tensor' };
const steps = options.numInferenceSteps;

async function images() {
  const out = [];
  const t0 = performance.now();
  let computed = 0;
  let calls = 0;
  for (const [i, prompt] of prompts.entries()) {
    const r = await pipe.generate({ ...options, prompt, seed: i });
    out.push(r.images);
    computed += r.timings.cache?.computed ?? 0;
    calls += r.timings.cache?.calls ?? 0;
  }
  await dt.sync();
  return { images: out, seconds: (performance.now() - t0) / 1000, computed, calls };
}

// PSNR of [0, 1] pixels; Infinity where the images are the same (written 'identical')
const psnr = async (a, b) => 10 * Math.log10(1 / (await dt.tidy(() => a.sub(b).square().mean()).item()));
const db = (v) => (Number.isFinite(v) ? +v.toFixed(2) : 'identical');

// a warm-up run (allocator, kernels), then the uncached images
dt.dispose((await images()).images);
const reference = await images();
// MagCache's ratios, as a calibrating run on the first prompt measures them
pipe.transformer.enableCache({ kind: 'mag', calibrate: true, numInferenceSteps: steps });
const calibration = await pipe.generate({ ...options, prompt: prompts[0], seed: 0 });
calibration.images.dispose();
const ratios = calibration.timings.cache.decisions.filter((d) => d.context === 'cond').map((d) => +d.statistic.toFixed(5));
pipe.transformer.disableCache();
console.log(JSON.stringify({ bench, device, model: 'shapes-flux', steps, prompts: prompts.length, uncached_s: +reference.seconds.toFixed(3), mag_ratios: ratios }));

const rows = [];
for (const setting of settings) {
  const config = setting.kind === 'mag' ? { ...setting, magRatios: ratios, numInferenceSteps: steps } : setting;
  pipe.transformer.enableCache(config);
  const run = await images();
  pipe.transformer.disableCache();
  const values = [];
  for (const [i, image] of run.images.entries()) values.push(await psnr(image, reference.images[i]));
  dt.dispose(run.images);
  const row = {
    bench, device, setting, computed: run.computed, calls: run.calls, computed_fraction: +(run.computed / run.calls).toFixed(3),
    seconds: +run.seconds.toFixed(3), speedup: +(reference.seconds / run.seconds).toFixed(3),
    psnr_mean_db: db(values.reduce((s, v) => s + v, 0) / values.length), psnr_worst_db: db(Math.min(...values)),
  };
  rows.push(row);
  console.log(JSON.stringify(row));
}
dt.dispose(reference.images);
pipe.dispose();
console.log(JSON.stringify({ bench, summary: true, device, rows: rows.map((r) => ({ setting: r.setting, computed: `${r.computed}/${r.calls}`, psnr_mean_db: r.psnr_mean_db, speedup: r.speedup })) }));
