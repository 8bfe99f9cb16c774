#!/usr/bin/env node
// bench/hf: the T5-XXL encoder (512 tokens) and the CLIP-L and CLIP-G text encoders (77 tokens)
// at full size with random weights, DTorch's @dtorch/hf models beside transformers' own model
// classes (text_encoders.py, eager and torch.compile(mode="reduce-overhead")) in one run.
// Sizes: bench/hf/models.json (the hub configs). Weights: nn.skipInit, then values made on the
// GPU itself (a hash of each element's index, scaled as the model's init; no download, no
// host-side random draws). Per model and side:
//   latency_ms    one forward, waited for, best of ROUNDS rounds of ITERS (what a prompt costs)
//   pipelined_ms  forwards queued back to back, per forward
//   record_ms     of a forward waited for, the time its call() takes to return (recording it):
//                 latency_ms less this is what the devices take after the program is done
//   gpu_busy_ms   from a kernel trace of one forward (LibTorch's profiler / torch.profiler),
//                 taken after every timing (a profiler that has run slows later launches): the
//                 union of the GPU's kernel intervals; gpu_idle_share = 1 - busy / latency, the
//                 time the GPU waits for work to be issued (what graph replay removes)
// DTorch runs each model as it is (side dtorch) and compiled (side dtorch_compiled:
// model.compile(), whose later calls copy the first call's recording without running forward;
// the counterpart of torch.compile on the other side).
// transformers runs before DTorch and again after (eager), and its better eager figure counts.
// QUANTIZE=fp8 adds a side dtorch_fp8: the model compiled with its block linears in FP8
// (model.quantize('fp8'), issue 44: T5-XXL at 512 tokens ≤ 6 ms), its last hidden state's
// relative L2 from the bfloat16 model's (the same weights) as fp8_rel_l2.
//   DEVICE=cuda node bench/hf/text_encoders.mjs      (MODELS, ITERS, ROUNDS, COMPILE=0 skips torch.compile,
//   ANCHORS=0 skips transformers: DTorch's lines alone, no summary; DTORCH_COMPILED=0 skips dtorch_compiled; QUANTIZE=fp8)
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { graphCounters } from './graph_counters.mjs';
import { idleFields } from './gpu_idle.mjs';
import { fillLikeTransformersInit } from './random_init.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const models = (process.env.MODELS ?? 't5-xxl,clip-l,clip-g').split(',');
const iters = Number(process.env.ITERS ?? 20);
const rounds = Number(process.env.ROUNDS ?? 5);
const compile = process.env.COMPILE ?? '1';
const anchors = (process.env.ANCHORS ?? '1') !== '0'; // 0: DTorch alone (an experiment; no summary without transformers)
const compiledToo = (process.env.DTORCH_COMPILED ?? '1') !== '0';
const quantize = process.env.QUANTIZE || undefined; // 'fp8': the dtorch_fp8 side too (empty: none, as bench/hf/pipelines.mjs reads it)
if (quantize !== undefined && quantize !== 'fp8') throw new Error(`QUANTIZE=${quantize}: the only one is fp8`);
const T5_FP8_TARGET_MS = 6; // issue 44: T5-XXL, 512 tokens, on one H200
const specs = JSON.parse(readFileSync(join(here, 'models.json'), 'utf8'));
dt.setCaptureStacks(false); // as under NODE_ENV=production

const classes = {
  T5EncoderModel: [hf.T5Config, hf.T5EncoderModel],
  CLIPTextModel: [hf.CLIPTextConfig, hf.CLIPTextModel],
  CLIPTextModelWithProjection: [hf.CLIPTextConfig, hf.CLIPTextModelWithProjection],
};

function inputIds(spec, mesh) {
  const vocab = spec.config.vocab_size;
  const ids = Array.from({ length: spec.tokens }, (_, i) => ((i * 7919) % (vocab - 2)) + 1);
  return dt.tensor([ids], { dtype: 'int64', mesh });
}

const mean = (out) => out.lastHiddenState.to('float32').abs().mean();

// A model of `spec` on one device with random weights (compiled: model.compile(); fp8: its block
// linears quantized as fromPretrained's { quantize: 'fp8' } leaves them), and its input.
function build(spec, compiled, fp8 = false) {
  const [Config, Model] = classes[spec.class];
  const mesh = new dt.DeviceMesh(device, [0]);
  const model = nn.skipInit(() => new Model(Config.fromDict(spec.config), { mesh, dtype }));
  fillLikeTransformersInit(model);
  if (fp8) model.quantize('fp8');
  model.packProjections(); // as fromPretrained leaves a model: q, k and v in one matmul
  if (compiled) model.compile();
  const ids = inputIds(spec, mesh);
  const recorded = { ms: 0, calls: 0 }; // the time model.call takes to return: recording, on the host
  const once = async () => {
    const t0 = process.hrtime.bigint();
    const out = model.call(ids);
    recorded.ms += Number(process.hrtime.bigint() - t0) / 1e6;
    recorded.calls++;
    await dt.sync();
    dt.dispose(out);
  };
  const release = async () => {
    dt.dispose(ids);
    model.dispose();
    await dt.sync();
  };
  return { model, ids, once, release, recorded };
}

// with QUANTIZE, each model's last hidden state in float32 from its first side (bfloat16), for fp8_rel_l2
const references = new Map();

async function measure(name, compiled, fp8 = false) {
  const spec = specs[name];
  const { model, ids, once, release, recorded } = build(spec, compiled, fp8);
  for (let i = 0; i < 3; i++) await once(); // warm up: kernels, allocator
  Object.assign(recorded, { ms: 0, calls: 0 });
  let [latency, pipelined] = [Infinity, Infinity];
  const heldAfterRounds = [];
  for (let r = 0; r < rounds; r++) {
    let start = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) await once();
    latency = Math.min(latency, Number(process.hrtime.bigint() - start) / 1e6 / iters);
    start = process.hrtime.bigint();
    let previous;
    for (let i = 0; i < iters; i++) {
      const out = model.call(ids);
      await null; // ends the JS task: the segment goes to the controller before its output is released
      dt.dispose(previous);
      previous = out;
    }
    await dt.sync();
    dt.dispose(previous);
    pipelined = Math.min(pipelined, Number(process.hrtime.bigint() - start) / 1e6 / iters);
    if (device === 'cuda') heldAfterRounds.push(dt.cuda.memoryStats(0).allocatedBytes);
  }
  const out = model.call(ids);
  const checksum = await dt.tidy(() => mean(out)).item();
  let relL2;
  if (quantize && !references.has(name)) references.set(name, dt.keep(out.lastHiddenState.to('float32')));
  else if (fp8) {
    const want = references.get(name);
    relL2 = await dt.tidy(() => out.lastHiddenState.to('float32').sub(want).pow(2).sum().sqrt().div(want.pow(2).sum().sqrt())).item();
  }
  dt.dispose(out);
  const compileStats = model.compileStats ? { ...model.compileStats } : undefined;
  await release();
  return {
    bench: 'hf_text_encoders', side: fp8 ? 'dtorch_fp8' : compiled ? 'dtorch_compiled' : 'dtorch', model: name, ...(compileStats ? { compile_stats: compileStats } : {}), device, dtype, tokens: spec.tokens, iters, rounds,
    ...(fp8 ? { quantize: 'fp8', fp8_rel_l2: relL2 === undefined ? null : +relL2.toPrecision(4) } : {}),
    latency_ms: +latency.toFixed(3), pipelined_ms: +pipelined.toFixed(3), record_ms: +(recorded.ms / recorded.calls).toFixed(3), checksum, held_after_rounds: heldAfterRounds, graphs: graphCounters(),
  };
}

// The GPU's busy time in one forward, from a kernel trace. Run after every timing: a profiler
// that has run leaves the process slower to launch kernels.
async function trace(name, compiled, fp8) {
  const { once, release } = build(specs[name], compiled, fp8);
  for (let i = 0; i < 3; i++) await once();
  const t = await dt.cuda.traceKernels(once, { top: 5, gaps: 24 });
  await release();
  const busy = t.devices.find((d) => d.device === 0);
  return { busy, top: t.top.map((k) => ({ name: k.name.slice(0, 80), calls: k.calls, ms: +k.totalMs.toFixed(3) })) };
}

function transformers(compileToo) {
  if (!anchors) return [];
  const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
  const args = [join(here, 'text_encoders.py'), device, dtype, models.join(','), String(iters), String(rounds), compileToo];
  const r = spawnSync(python, ['-W', 'ignore', ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  if (r.status !== 0) lines.push({ bench: 'hf_text_encoders', side: 'transformers', error: r.stderr.trim().split('\n').slice(-3).join(' | ') });
  return lines;
}

// transformers runs before ours and again (eager) after, each in its own process (its GPU memory
// is free again before ours is taken); its better eager figure counts
const before = transformers(compile);
const ours = [];
for (const name of models) {
  ours.push(await measure(name, false));
  if (compiledToo) ours.push(await measure(name, true));
  if (quantize === 'fp8') ours.push(await measure(name, true, true));
}
dt.dispose([...references.values()]);
if (device === 'cuda') {
  for (const o of ours) {
    const { busy, top } = await trace(o.model, o.side !== 'dtorch', o.side === 'dtorch_fp8');
    Object.assign(o, { gpu_busy_ms: busy ? +busy.busyMs.toFixed(3) : null, gpu_events: busy?.events ?? null, gpu_idle_share: busy ? +(1 - busy.busyMs / o.latency_ms).toFixed(3) : null, ...idleFields(busy), top_kernels: top });
  }
}
const after = transformers('0');
for (const line of [...before, ...after, ...ours]) console.log(JSON.stringify(line));
for (const o of ours.filter((line) => line.side === 'dtorch')) {
  const c = ours.find((line) => line.model === o.model && line.side === 'dtorch_compiled');
  const f = ours.find((line) => line.model === o.model && line.side === 'dtorch_fp8');
  const eagers = [...before, ...after].filter((t) => t.model === o.model && t.side === 'transformers_eager');
  const eager = eagers.sort((a, b) => a.latency_ms - b.latency_ms)[0];
  const compiled = before.find((t) => t.model === o.model && t.side === 'transformers_compiled');
  if (!eager) continue;
  console.log(JSON.stringify({
    bench: 'hf_text_encoders', summary: true, model: o.model, device, dtype, tokens: o.tokens,
    dtorch_ms: o.latency_ms, transformers_eager_ms: eager.latency_ms, transformers_eager_runs_ms: eagers.map((e) => e.latency_ms),
    transformers_compiled_ms: compiled?.latency_ms ?? null,
    ratio_vs_eager: +(o.latency_ms / eager.latency_ms).toFixed(3), target: 0.7, met: o.latency_ms / eager.latency_ms <= 0.7,
    ratio_vs_compiled: compiled ? +(o.latency_ms / compiled.latency_ms).toFixed(3) : null,
    dtorch_compiled_ms: c?.latency_ms ?? null, dtorch_compiled_record_ms: c?.record_ms ?? null, dtorch_compiled_gpu_busy_ms: c?.gpu_busy_ms ?? null,
    compiled_ratio_vs_compiled: c && compiled ? +(c.latency_ms / compiled.latency_ms).toFixed(3) : null,
    // forwards queued back to back (throughput), both compiled: the measure the compiled figures match
    dtorch_compiled_pipelined_ms: c?.pipelined_ms ?? null, transformers_compiled_pipelined_ms: compiled?.pipelined_ms ?? null,
    compiled_pipelined_ratio: c && compiled ? +(c.pipelined_ms / compiled.pipelined_ms).toFixed(3) : null,
    pipelined_ratio_vs_eager: +(o.pipelined_ms / Math.min(...eagers.map((e) => e.pipelined_ms))).toFixed(3),
    dtorch_gpu_busy_ms: o.gpu_busy_ms ?? null, dtorch_gpu_idle_share: o.gpu_idle_share ?? null,
    ...(f ? {
      dtorch_fp8_ms: f.latency_ms, dtorch_fp8_pipelined_ms: f.pipelined_ms, fp8_rel_l2: f.fp8_rel_l2,
      fp8_ratio_vs_compiled: compiled ? +(f.latency_ms / compiled.latency_ms).toFixed(3) : null,
      ...(o.model === 't5-xxl' ? { target_fp8_ms: T5_FP8_TARGET_MS, target_fp8_ms_met: f.latency_ms <= T5_FP8_TARGET_MS } : {}),
    } : {}),
    transformers_eager_gpu_idle_share: eager.gpu_idle_share, transformers_compiled_gpu_idle_share: compiled?.gpu_idle_share ?? null,
  }));
}
