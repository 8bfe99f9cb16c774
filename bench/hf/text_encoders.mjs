#!/usr/bin/env node
// bench/hf: the T5-XXL encoder (512 tokens) and the CLIP-L and CLIP-G text encoders (77 tokens)
// at full size with random weights, DTorch's @dtorch/hf models beside transformers' own model
// classes (text_encoders.py, eager and torch.compile(mode="reduce-overhead")) in one run.
// Sizes: bench/hf/models.json (the hub configs). Weights: nn.skipInit, then values made on the
// GPU itself (a hash of each element's index, scaled as the model's init; no download, no
// host-side random draws). Per model and side:
//   latency_ms    one forward, waited for, best of ROUNDS rounds of ITERS (what a prompt costs)
//   pipelined_ms  forwards queued back to back, per forward
//   gpu_busy_ms   from a kernel trace of one forward (LibTorch's profiler / torch.profiler):
//                 the union of the GPU's kernel intervals; gpu_idle_share = 1 - busy / latency,
//                 the time the GPU waits for work to be issued (what graph replay removes)
//   DEVICE=cuda node bench/hf/text_encoders.mjs      (MODELS, ITERS, ROUNDS, COMPILE=0 skips torch.compile)
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const models = (process.env.MODELS ?? 't5-xxl,clip-l,clip-g').split(',');
const iters = Number(process.env.ITERS ?? 20);
const rounds = Number(process.env.ROUNDS ?? 5);
const compile = process.env.COMPILE ?? '1';
const specs = JSON.parse(readFileSync(join(here, 'models.json'), 'utf8'));
dt.setCaptureStacks(false); // as under NODE_ENV=production

const classes = {
  T5EncoderModel: [hf.T5Config, hf.T5EncoderModel],
  CLIPTextModel: [hf.CLIPTextConfig, hf.CLIPTextModel],
  CLIPTextModelWithProjection: [hf.CLIPTextConfig, hf.CLIPTextModelWithProjection],
};

// Values in [-0.5, 0.5) from each element's index, made on the parameter's own device.
function noise(p, seed) {
  return dt.tidy(() => {
    const i = dt.arange(p.numel, undefined, 1, { mesh: p.mesh, dtype: 'float32' });
    const h = i.mul(12.9898).add(seed * 78.233).sin().mul(43758.5453);
    return h.sub(h.floor()).sub(0.5).reshape(p.shape);
  });
}

// Norm weights near 1, other weights and biases scaled as transformers' inits (std ~ 0.02).
function fillRandom(model) {
  let seed = 0;
  for (const [key, p] of model.namedParameters()) {
    const isNorm = /norm/.test(key) && key.endsWith('weight');
    const value = dt.tidy(() => noise(p, ++seed).mul(isNorm ? 0.1 : 0.07).add(isNorm ? 1 : 0).to(p.dtype));
    model.setTensor(key, value);
  }
}

function inputIds(spec, mesh) {
  const vocab = spec.config.vocab_size;
  const ids = Array.from({ length: spec.tokens }, (_, i) => ((i * 7919) % (vocab - 2)) + 1);
  return dt.tensor([ids], { dtype: 'int64', mesh });
}

const mean = (out) => (out.lastHiddenState ?? out).to('float32').abs().mean();

async function measure(name) {
  const spec = specs[name];
  const [Config, Model] = classes[spec.class];
  const mesh = new dt.DeviceMesh(device, [0]);
  const model = nn.skipInit(() => new Model(Config.fromDict(spec.config), { mesh, dtype }));
  fillRandom(model);
  const ids = inputIds(spec, mesh);
  const forward = () => model.call(ids);
  const once = async () => {
    const out = forward();
    await dt.sync();
    dt.dispose(out);
  };
  for (let i = 0; i < 3; i++) await once(); // warm up: kernels, allocator
  let [latency, pipelined] = [Infinity, Infinity];
  const heldAfterRounds = [];
  for (let r = 0; r < rounds; r++) {
    let start = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) await once();
    latency = Math.min(latency, Number(process.hrtime.bigint() - start) / 1e6 / iters);
    start = process.hrtime.bigint();
    let previous;
    for (let i = 0; i < iters; i++) {
      const out = forward();
      await null; // ends the JS task: the segment goes to the controller before its output is released
      dt.dispose(previous);
      previous = out;
    }
    await dt.sync();
    dt.dispose(previous);
    pipelined = Math.min(pipelined, Number(process.hrtime.bigint() - start) / 1e6 / iters);
    if (device === 'cuda') heldAfterRounds.push(dt.cuda.memoryStats(0).allocatedBytes);
  }
  const trace = device === 'cuda' ? await dt.cuda.traceKernels(once, { top: 5 }) : undefined;
  const busy = trace?.devices.find((d) => d.device === 0);
  const out = forward();
  const checksum = await dt.tidy(() => mean(out)).item();
  dt.dispose([out, ids]);
  model.dispose();
  await dt.sync();
  return {
    bench: 'hf_text_encoders', side: 'dtorch', model: name, device, dtype, tokens: spec.tokens, iters, rounds,
    latency_ms: +latency.toFixed(3), pipelined_ms: +pipelined.toFixed(3),
    gpu_busy_ms: busy ? +busy.busyMs.toFixed(3) : null, gpu_events: busy?.events ?? null,
    gpu_idle_share: busy ? +(1 - busy.busyMs / latency).toFixed(3) : null,
    top_kernels: trace?.top.map((k) => ({ name: k.name.slice(0, 80), calls: k.calls, ms: +k.totalMs.toFixed(3) })),
    checksum, held_after_rounds: heldAfterRounds,
  };
}

function transformers() {
  const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
  const args = [join(here, 'text_encoders.py'), device, dtype, models.join(','), String(iters), String(rounds), compile];
  const r = spawnSync(python, ['-W', 'ignore', ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  if (r.status !== 0) lines.push({ bench: 'hf_text_encoders', side: 'transformers', error: r.stderr.trim().split('\n').slice(-3).join(' | ') });
  return lines;
}

const theirs = transformers(); // first, in its own process: its GPU memory is free again before ours
for (const line of theirs) console.log(JSON.stringify(line));
for (const name of models) {
  const ours = await measure(name);
  console.log(JSON.stringify(ours));
  const eager = theirs.find((t) => t.model === name && t.side === 'transformers_eager');
  const compiled = theirs.find((t) => t.model === name && t.side === 'transformers_compiled');
  if (!eager) continue;
  console.log(JSON.stringify({
    bench: 'hf_text_encoders', summary: true, model: name, device, dtype, tokens: ours.tokens,
    dtorch_ms: ours.latency_ms, transformers_eager_ms: eager.latency_ms, transformers_compiled_ms: compiled?.latency_ms ?? null,
    ratio_vs_eager: +(ours.latency_ms / eager.latency_ms).toFixed(3), target: 0.7,
    ratio_vs_compiled: compiled ? +(ours.latency_ms / compiled.latency_ms).toFixed(3) : null,
    pipelined_ratio_vs_eager: +(ours.pipelined_ms / eager.pipelined_ms).toFixed(3),
    dtorch_gpu_idle_share: ours.gpu_idle_share, transformers_eager_gpu_idle_share: eager.gpu_idle_share, transformers_compiled_gpu_idle_share: compiled?.gpu_idle_share ?? null,
  }));
}
