// Batching's gain in `dtorch serve` (issue 47): REQUESTS concurrent text-to-image requests
// through HTTP, served one at a time (--max-batch 1) and in batches (--max-batch BATCH), images
// per minute of each and their ratio. The run is FLUX.1-dev at 1024², 28 steps, 8
// requests, --max-batch 4 on a GPU:
//
//   MODEL=flux-dev DEVICE=cuda node bench/serve/gpu_throughput.mjs
//   node bench/serve/gpu_throughput.mjs          (tiny-flux on the CPU at 64x64, 4 steps: the same code path)
//   MODEL=flux-dev TINY_MODEL=1 node bench/serve/gpu_throughput.mjs   (flux-dev's tiny config with random weights: a CPU check of that path)
//
// No weights are downloaded: flux-dev is FLUX.1-dev at full size with random weights, built as
// bench/hf/pipelines.mjs builds it (bench/hf/random_pipeline.mjs; the tiny pipelines'
// tokenizers), so its images are noise but its work per step is the real model's. The server is
// the one `dtorch serve` runs (hf.createImageServer over hf.PipelineRunner, with maxBatch as
// --max-batch), in this process, over one pipeline built once; the clients are HTTP requests
// from this process too. Each server first answers one warm-up request of n = its batch (the
// first call's kernels and allocations are not the service's speed). Prints one JSON line per
// setting, then one with the ratio.
//
// Env: MODEL (tiny-flux | flux-dev | another bench/hf/pipelines.json entry), DEVICE (cpu | cuda),
// SIZE (1024x1024 for flux-dev, else 64x64), STEPS (28 for flux-dev, else 4), REQUESTS (8), BATCH (4), WARMUP (1), TINY_MODEL (0).
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { randomPipeline } from '../hf/random_pipeline.mjs';

const env = process.env;
const MODEL = env.MODEL ?? 'tiny-flux';
const DEVICE = env.DEVICE ?? 'cpu';
const random = MODEL !== 'tiny-flux';
const tinyModel = env.TINY_MODEL === '1';
const full = random && !tinyModel;
const SIZE = env.SIZE ?? (full ? '1024x1024' : '64x64');
const STEPS = Number(env.STEPS ?? (full ? 28 : 4));
const REQUESTS = Number(env.REQUESTS ?? 8);
const BATCH = Number(env.BATCH ?? 4);
const WARMUP = env.WARMUP !== '0';
const dtype = DEVICE === 'cuda' ? 'bfloat16' : 'float32';
const commit = (() => {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
})();
dt.setCaptureStacks(false); // as under NODE_ENV=production

function emit(record) {
  const gpu = DEVICE === 'cuda' ? { gpu: dt.cuda.devices()[0]?.name ?? null } : { cores: availableParallelism() };
  console.log(JSON.stringify({ bench: 'serve_throughput', model: MODEL, randomWeights: random, ...(tinyModel && { tinyModel }), device: DEVICE, dtype, size: SIZE, steps: STEPS, requests: REQUESTS, node: process.version, commit, ...gpu, ...record }));
}

async function post(url, body) {
  const started = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(3_600_000) });
  const answer = await res.json();
  return { status: res.status, ms: performance.now() - started, batch: answer.dtorch?.batch_images ?? null, error: answer.error?.message ?? null };
}

// REQUESTS requests at once to a server of `maxBatch` over `pipe`: images per minute
async function measure(pipe, maxBatch, work) {
  const server = await hf.createImageServer(new hf.PipelineRunner(pipe), { port: 0, logLevel: 'warn', outputDir: join(work, `batch-${maxBatch}`), maxBatch, maxQueue: REQUESTS + 1, limits: { maxSide: Math.max(1024, ...SIZE.split('x').map(Number)) } });
  const url = `${server.url}/v1/images/generations`;
  try {
    if (WARMUP) {
      const warm = await post(url, { prompt: 'warm up', n: maxBatch, seed: 0, size: SIZE, steps: STEPS, response_format: 'url' });
      if (warm.status !== 200) throw new Error(`warm-up: ${warm.status} ${warm.error}`);
    }
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => post(url, { prompt: `request ${i}: a photo of a cat sitting on a windowsill at sunset`, seed: i + 1, size: SIZE, steps: STEPS, response_format: 'url' })));
    const seconds = (performance.now() - started) / 1000;
    const ok = results.filter((r) => r.status === 200);
    const latencies = ok.map((r) => r.ms).sort((a, b) => a - b);
    const record = {
      maxBatch,
      statuses: results.reduce((c, r) => ({ ...c, [r.status]: (c[r.status] ?? 0) + 1 }), {}),
      errors: [...new Set(results.map((r) => r.error).filter(Boolean))].slice(0, 3),
      seconds: Number(seconds.toFixed(2)),
      imagesPerMinute: Number(((60 * ok.length) / seconds).toFixed(2)),
      p50Ms: latencies.length ? Math.round(latencies[Math.ceil(latencies.length / 2) - 1]) : null,
      maxMs: latencies.length ? Math.round(latencies.at(-1)) : null,
      batchImages: results.map((r) => r.batch),
      ...(DEVICE === 'cuda' && { peakGiB: Number((dt.cuda.memoryStats(0).peakAllocatedBytes / 2 ** 30).toFixed(2)) }),
    };
    emit(record);
    return record;
  } finally {
    await server.close();
  }
}

const work = mkdtempSync(join(tmpdir(), 'dtorch-serve-throughput-'));
const mesh = new dt.DeviceMesh(DEVICE, [0]);
const builtAt = performance.now();
const pipe = random ? (await randomPipeline(MODEL, { mesh, dtype, tiny: tinyModel })).pipe : await hf.FluxPipeline.tiny({ mesh, dtype });
await dt.sync();
const buildS = Number(((performance.now() - builtAt) / 1000).toFixed(1));
try {
  const alone = await measure(pipe, 1, work);
  const batched = await measure(pipe, BATCH, work);
  emit({ summary: true, buildS, maxBatch: BATCH, imagesPerMinuteAlone: alone.imagesPerMinute, imagesPerMinuteBatched: batched.imagesPerMinute, throughputRatio: Number((batched.imagesPerMinute / alone.imagesPerMinute).toFixed(3)), allAnswered: [alone, batched].every((r) => r.statuses[200] === REQUESTS) });
} catch (err) {
  emit({ error: String(err?.message ?? err).slice(0, 400) });
  process.exitCode = 1;
} finally {
  pipe.dispose();
  rmSync(work, { recursive: true, force: true });
}
