#!/usr/bin/env node
// bench/hf: one denoising step of FLUX.1-dev's transformer (1024x1024: 4,096 image + 512 text
// tokens, batch 1), one of SD3-medium's (128x128 latents, 333 text tokens, batch 2 for
// classifier-free guidance) and a decode of SD3's / Flux's VAE ([1, 16, 128, 128] latents to
// 1024x1024), at full size with random weights, DTorch's @dtorch/hf models beside diffusers' own
// classes (diffusion_models.py: eager, and under torch.compile where cheap enough) in one run.
// DTorch runs each model as it is (side dtorch) and compiled (side dtorch_compiled:
// model.compile(), whose later calls copy the first call's recording without running forward,
// and which a GPU replays as CUDA graphs; the counterpart of torch.compile on the other side).
// Sizes: bench/hf/models.json (the hub configs; SIZE=tiny: their tiny configs, for a CPU check).
// Weights: nn.skipInit, then values made on the device itself (a hash of each element's index,
// scaled as PyTorch's default init; no download, no host-side random draws). Per model and side:
//   latency_ms    one step, waited for: the best of ITERS after WARMUP (median_ms beside it)
//   pipelined_ms  ITERS steps queued back to back, per step
//   peak_gib      the allocator's peak over the timed steps, weights included
//                 (dt.cuda.memoryStats / torch.cuda.max_memory_allocated); held_gib before them
//                 (weights and inputs), peak_above_held_gib the difference (the activations)
//   gpu_busy_ms   from a kernel trace of one step, taken after the timings; gpu_idle_share =
//                 1 - busy / latency; kernel_ms that step's kernel time by category (attention,
//                 matmul, norm, elementwise, copy, ...: kernel_categories.json), top_kernels the 25 longest
// Each model's sides run in processes of their own, one after another (GPU memory is free again
// before the next side builds its model, and no profiler has run before a timing): diffusers
// (eager, then compiled), then DTorch; at the end one process runs diffusers eager again for all
// of them where BUDGET_S leaves time, and diffusers' better eager figure counts. A summary line
// per model gives the ratios and whether the issue's targets (models.json "target") are met.
//   DEVICE=cuda node bench/hf/diffusion_models.mjs
//   DEVICE=cpu SIZE=tiny node bench/hf/diffusion_models.mjs
// Env: MODELS (flux-dev,sd3-medium,vae-decode), ITERS (10), WARMUP (3), COMPILE (default: each
// model's compile.default on cuda, SD3 and the VAE; 0; 1; or a list of model names),
// COMPILE_MODE (torch.compile mode, default), DTORCH_COMPILED (1; 0 skips dtorch_compiled),
// PACK (1; 0: DTorch's q/k/v projections left unpacked, an experiment),
// ANCHORS (1; 0: DTorch's sides alone, an experiment), TRACE (1), AGAIN (1: diffusers eager again after
// DTorch), BUDGET_S (360: a step still running then is stopped, later ones skipped),
// DIFFUSERS_SRC (the folder holding the `diffusers` package, put on PYTHONPATH; else the first of
// /tmp/diffusers-src/src, /tmp/diffusers-src, /work/diffusers-src/src that holds it), PYTHON.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { childRuns, diffusersPython } from './child_runs.mjs';
import { fluxStepInputs } from './flux_step.mjs';
import { graphCounters } from './graph_counters.mjs';
import { idleFields } from './gpu_idle.mjs';
import { fillLikeTorchInit, noise } from './random_init.mjs';

const self = fileURLToPath(import.meta.url);
const here = dirname(self);
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const size = process.env.SIZE ?? 'full';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const models = (process.env.MODELS ?? 'flux-dev,sd3-medium,vae-decode').split(',').filter(Boolean);
const iters = Number(process.env.ITERS ?? 10);
const warmup = Number(process.env.WARMUP ?? 3);
const compileEnv = process.env.COMPILE ?? (device === 'cuda' ? 'default' : '0');
const compileMode = process.env.COMPILE_MODE ?? 'default';
const traceOn = (process.env.TRACE ?? '1') !== '0';
const compiledToo = (process.env.DTORCH_COMPILED ?? '1') !== '0';
const anchors = (process.env.ANCHORS ?? '1') !== '0';
const pack = (process.env.PACK ?? '1') !== '0';
const again = (process.env.AGAIN ?? '1') !== '0';
const budgetS = Number(process.env.BUDGET_S ?? 360);
const specs = JSON.parse(readFileSync(join(here, 'models.json'), 'utf8'));
const GIB = 1024 ** 3;
// enough of a kernel's name to show its functor (LibTorch's elementwise kernels differ only there)
const kernelNameChars = 200;
const bench = 'hf_diffusion';
dt.setCaptureStacks(false); // as under NODE_ENV=production

const classes = {
  FluxTransformer2DModel: [hf.FluxTransformer2DConfig, hf.FluxTransformer2DModel],
  SD3Transformer2DModel: [hf.SD3Transformer2DConfig, hf.SD3Transformer2DModel],
  AutoencoderKL: [hf.AutoencoderKLConfig, hf.AutoencoderKL],
};

// The spec's config and input sizes, with the tiny ones over them for SIZE=tiny.
function specFor(name) {
  const spec = specs[name];
  if (!spec?.class || !classes[spec.class]) throw new Error(`diffusion_models: no diffusion model "${name}" in models.json`);
  const tiny = size === 'tiny' ? spec.tiny : { config: {}, inputs: {} };
  return { spec, config: { ...spec.config, ...tiny.config }, inputs: { ...spec.inputs, ...tiny.inputs } };
}

// The model of `name` on one device with random weights (compiled: model.compile()), its step
// and the output's expected shape.
function build(name, compiled) {
  const { spec, config, inputs } = specFor(name);
  const [Config, Model] = classes[spec.class];
  const mesh = new dt.DeviceMesh(device, [0]);
  const model = nn.skipInit(() => new Model(Config.fromDict(config), { mesh, dtype }));
  fillLikeTorchInit(model);
  if (pack) model.packProjections(); // as fromPretrained leaves a model: q, k and v in one matmul
  if (compiled) model.compile();
  const { batch: b, height: h, width: w } = inputs;
  const r = (shape, seed) => dt.tidy(() => noise(shape, mesh, 9000 + seed).mul(2).to(dtype));
  const f32 = { mesh, dtype: 'float32' };
  let call, want, held;
  if (spec.class === 'FluxTransformer2DModel') {
    const { x, options } = fluxStepInputs(config, inputs, mesh, dtype);
    call = () => model.call(x, options);
    want = [b, h * w, config.in_channels];
    held = [x, ...Object.values(options)];
  } else if (spec.class === 'SD3Transformer2DModel') {
    const options = {
      encoderHiddenStates: r([b, inputs.text_tokens, config.joint_attention_dim], 2),
      pooledProjections: r([b, config.pooled_projection_dim], 3),
      timestep: dt.full([b], inputs.timestep, f32),
    };
    const x = r([b, config.in_channels, h, w], 1);
    call = () => model.call(x, options);
    want = [b, config.out_channels, h, w];
    held = [x, ...Object.values(options)];
  } else {
    const z = r([b, config.latent_channels, h, w], 1);
    const scale = 2 ** (config.block_out_channels.length - 1);
    call = () => model.decode(z);
    want = [b, config.out_channels ?? 3, h * scale, w * scale];
    held = [z];
  }
  const once = async () => {
    const out = call();
    await dt.sync();
    dt.dispose(out);
  };
  const release = async () => {
    dt.dispose(held);
    model.dispose();
    await dt.sync();
  };
  return { model, call, once, release, want };
}

// Where a step's GPU time goes, split as gpu_busy.py splits diffusers' (kernel_categories.json).
const categories = JSON.parse(readFileSync(join(here, 'kernel_categories.json'), 'utf8')).categories.map(([c, p]) => [c, new RegExp(p, 'i')]);
function kernelCategories(kernels) {
  const ms = {};
  for (const k of kernels) {
    const c = categories.find(([, p]) => p.test(k.name))?.[0] ?? 'other';
    ms[c] = (ms[c] ?? 0) + k.totalMs;
  }
  return Object.fromEntries(Object.entries(ms).sort((a, b) => b[1] - a[1]).map(([c, v]) => [c, +v.toFixed(3)]));
}

// DTorch's side of one model (run in a worker process of its own).
async function measure(name, compiled) {
  const start = process.hrtime.bigint();
  const ms = (since) => Number(process.hrtime.bigint() - since) / 1e6;
  const { model, call, once, release, want } = build(name, compiled);
  await dt.sync();
  const buildS = ms(start) / 1000;
  const warm = process.hrtime.bigint();
  for (let i = 0; i < warmup; i++) await once(); // kernels, allocator
  const warmupS = ms(warm) / 1000;
  const cuda = device === 'cuda';
  const held = cuda ? dt.cuda.memoryStats(0).allocatedBytes : null;
  if (cuda) dt.cuda.resetPeakMemoryStats(0);
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = process.hrtime.bigint();
    await once();
    times.push(ms(t0));
  }
  const peak = cuda ? dt.cuda.memoryStats(0).peakAllocatedBytes : null;
  const p0 = process.hrtime.bigint();
  let previous;
  for (let i = 0; i < iters; i++) {
    const out = call();
    await null; // ends the JS task: the segment goes to the controller before its output is released
    dt.dispose(previous);
    previous = out;
  }
  await dt.sync();
  dt.dispose(previous);
  const pipelined = ms(p0) / iters;
  // after every timing: a profiler that has run leaves the process slower to launch kernels
  let busy = null;
  let top = null;
  let kernelMs = null;
  if (cuda && traceOn) {
    const t = await dt.cuda.traceKernels(once, { top: 100000, gaps: 40 });
    busy = t.devices.find((d) => d.device === 0) ?? null;
    kernelMs = kernelCategories(t.top);
    top = t.top.slice(0, 25).map((k) => ({ name: k.name.slice(0, kernelNameChars), calls: k.calls, ms: +k.totalMs.toFixed(3) }));
  }
  const out = call();
  const [maxAbs, meanAbs] = await Promise.all(dt.tidy(() => [out.to('float32').abs().max(), out.to('float32').abs().mean()]).map(async (x) => {
    const v = await x.item();
    x.dispose();
    return v;
  }));
  const shape = [...out.shape];
  dt.dispose(out);
  const compileStats = compiled ? { ...model.compileStats } : undefined;
  await release();
  const sorted = [...times].sort((a, b) => a - b);
  const latency = sorted[0];
  return {
    bench, side: compiled ? 'dtorch_compiled' : 'dtorch', model: name, ...(compileStats ? { compile_stats: compileStats } : {}), device, dtype, size, iters, warmup,
    latency_ms: +latency.toFixed(3), median_ms: +sorted[Math.floor(sorted.length / 2)].toFixed(3), pipelined_ms: +pipelined.toFixed(3),
    peak_gib: peak === null ? null : +(peak / GIB).toFixed(3), held_gib: held === null ? null : +(held / GIB).toFixed(3),
    peak_above_held_gib: peak === null ? null : +((peak - held) / GIB).toFixed(3),
    warmup_s: +warmupS.toFixed(1), build_s: +buildS.toFixed(1),
    gpu_busy_ms: busy ? +busy.busyMs.toFixed(3) : null, gpu_events: busy?.events ?? null,
    gpu_idle_share: busy ? +(1 - busy.busyMs / latency).toFixed(3) : null, ...idleFields(busy), kernel_ms: kernelMs, top_kernels: top,
    shape, shape_ok: shape.length === want.length && shape.every((s, i) => s === want[i]), finite: Number.isFinite(maxAbs), checksum: meanAbs,
    graphs: graphCounters(),
  };
}

// ---- the run: every side of every model in a process of its own ------------------------------

function compileFor(name) {
  if (compileEnv === 'default') return specs[name].compile?.default ? '1' : '0';
  if (compileEnv === '0' || compileEnv === '1') return compileEnv;
  return compileEnv.split(',').includes(name) ? '1' : '0';
}

const children = childRuns(budgetS, { bench, device, size });
const left = children.left;

// A child's lines; diffusers' kernel traces come after all its timings: merged into the timing lines
function child(command, args, env, what) {
  const lines = [];
  for (const line of children.run(command, args, env, what)) {
    const timed = line.trace && lines.find((l) => l.model === line.model && l.side === line.side && l.pass === line.pass);
    if (timed) Object.assign(timed, { gpu_busy_ms: line.gpu_busy_ms, gpu_events: line.gpu_events, gpu_idle_share: line.gpu_idle_share, kernel_ms: line.kernel_ms, top_kernels: line.top_kernels });
    else lines.push(line);
  }
  return lines;
}

function diffusers(names, pass, compile) {
  const { python, env } = diffusersPython(root);
  const args = ['-W', 'ignore', join(here, 'diffusion_models.py'), '--models', names, '--device', device, '--dtype', dtype, '--size', size,
    '--iters', String(iters), '--warmup', String(warmup), '--compile', compile, '--compile-mode', compileMode, '--trace', traceOn && pass === 'before' ? '1' : '0', '--pass', pass];
  return child(python, args, env, { side: 'diffusers', model: names, pass });
}

function dtorch(name, compiled) {
  const side = compiled ? 'dtorch_compiled' : 'dtorch';
  return child(process.execPath, [self], { DIFFUSION_WORKER: name, DIFFUSION_WORKER_SIDE: side }, { side, model: name });
}

async function main() {
  const lines = [];
  const emit = (ls) => {
    for (const l of ls) {
      lines.push(l);
      console.log(JSON.stringify(l));
    }
  };
  const skipped = (what) => emit([{ bench, ...what, device, size, skipped: `BUDGET_S ${budgetS} reached` }]);
  for (const name of models) specFor(name); // unknown names fail before anything runs
  // the order of importance: diffusers then DTorch for each model, then diffusers eager again
  for (const name of models) {
    if (!anchors) {
      // no diffusers side
    } else if (left() > 20) emit(diffusers(name, 'before', compileFor(name)));
    else skipped({ side: 'diffusers', model: name, pass: 'before' });
    for (const compiled of compiledToo ? [false, true] : [false]) {
      if (left() > 10) emit(dtorch(name, compiled));
      else skipped({ side: compiled ? 'dtorch_compiled' : 'dtorch', model: name });
    }
  }
  // one process for all of them (eager only, no profiler: nothing slows the later timings)
  if (anchors && again && left() > 30) emit(diffusers(models.join(','), 'after', '0'));
  else if (anchors && again) for (const name of models) skipped({ side: 'diffusers', model: name, pass: 'after' });
  if (anchors) for (const name of models) emit([summary(name, lines)]);
  console.log(JSON.stringify({ bench, done: true, device, size, models, wall_s: +children.elapsedS().toFixed(1) }));
}

function summary(name, lines) {
  const { spec } = specFor(name);
  const ok = (l) => l.model === name && l.latency_ms !== undefined;
  const ours = lines.find((l) => ok(l) && l.side === 'dtorch');
  const oursCompiled = lines.find((l) => ok(l) && l.side === 'dtorch_compiled');
  const eagers = lines.filter((l) => ok(l) && l.side === 'diffusers_eager');
  const eager = [...eagers].sort((a, b) => a.latency_ms - b.latency_ms)[0];
  const compiled = lines.find((l) => ok(l) && l.side === 'diffusers_compiled');
  const ratio = (a, b) => (a != null && b ? +(a / b).toFixed(3) : null);
  const full = size === 'full' && device === 'cuda';
  const target = full ? (spec.target ?? {}) : {};
  const msMet = ours && target.ms != null ? ours.latency_ms <= target.ms : null;
  const compiledMsMet = oursCompiled && target.ms != null ? oursCompiled.latency_ms <= target.ms : null;
  const peakMet = ours?.peak_gib != null && target.peak_gib != null ? ours.peak_gib <= target.peak_gib : null;
  const issue = spec.issue ?? {};
  return {
    bench, summary: true, model: name, device, dtype, size,
    dtorch_ms: ours?.latency_ms ?? null, dtorch_median_ms: ours?.median_ms ?? null, dtorch_pipelined_ms: ours?.pipelined_ms ?? null, dtorch_peak_gib: ours?.peak_gib ?? null,
    diffusers_eager_ms: eager?.latency_ms ?? null, diffusers_eager_runs_ms: eagers.map((e) => e.latency_ms), diffusers_eager_peak_gib: eager?.peak_gib ?? null,
    diffusers_compiled_ms: compiled?.latency_ms ?? null, diffusers_compiled_peak_gib: compiled?.peak_gib ?? null, diffusers_compile_s: compiled?.warmup_s ?? null,
    ratio_vs_eager: ratio(ours?.latency_ms, eager?.latency_ms), ratio_vs_compiled: ratio(ours?.latency_ms, compiled?.latency_ms),
    peak_ratio_vs_eager: ratio(ours?.peak_gib, eager?.peak_gib),
    dtorch_peak_above_held_gib: ours?.peak_above_held_gib ?? null, diffusers_eager_peak_above_held_gib: eager?.peak_above_held_gib ?? null,
    target_ms: target.ms ?? null, target_peak_gib: target.peak_gib ?? null, target_ms_met: msMet, target_peak_met: peakMet,
    target_met: msMet === null ? null : msMet && peakMet !== false,
    dtorch_compiled_ms: oursCompiled?.latency_ms ?? null, dtorch_compiled_median_ms: oursCompiled?.median_ms ?? null,
    dtorch_compiled_pipelined_ms: oursCompiled?.pipelined_ms ?? null, dtorch_compiled_peak_gib: oursCompiled?.peak_gib ?? null,
    dtorch_compiled_gpu_busy_ms: oursCompiled?.gpu_busy_ms ?? null, dtorch_compiled_graphs: oursCompiled?.graphs ?? null,
    compiled_ratio_vs_compiled: ratio(oursCompiled?.latency_ms, compiled?.latency_ms), compiled_target_ms_met: compiledMsMet,
    issue_diffusers_eager_ms: issue.diffusers_eager_ms ?? null, issue_diffusers_compiled_ms: issue.diffusers_compiled_ms ?? null,
    ratio_vs_issue_compiled: full ? ratio(ours?.latency_ms, issue.diffusers_compiled_ms) : null,
    shapes_ok: [ours, oursCompiled, eager, compiled].filter(Boolean).every((l) => l.shape_ok),
    finite: [ours, oursCompiled, eager, compiled].filter(Boolean).every((l) => l.finite),
    // not the same bits: the compiled step is one segment, the plain one several, and the
    // controller fuses pairs (a matmul's GELU epilogue, addcmul) only within a segment
    compiled_checksum_rel_diff: ours && oursCompiled ? +Math.abs(oursCompiled.checksum / ours.checksum - 1).toExponential(2) : null,
    dtorch_gpu_busy_ms: ours?.gpu_busy_ms ?? null, dtorch_gpu_idle_share: ours?.gpu_idle_share ?? null,
    dtorch_kernel_ms: ours?.kernel_ms ?? null, diffusers_eager_kernel_ms: eagers.find((e) => e.kernel_ms)?.kernel_ms ?? null,
    diffusers_compiled_kernel_ms: compiled?.kernel_ms ?? null,
    diffusers_eager_gpu_busy_ms: eagers.find((e) => e.gpu_busy_ms != null)?.gpu_busy_ms ?? null,
    diffusers_compiled_gpu_busy_ms: compiled?.gpu_busy_ms ?? null,
    errors: lines.filter((l) => String(l.model).split(',').includes(name) && (l.error || l.skipped)).map((l) => `${l.side}${l.pass ? ` ${l.pass}` : ''}: ${l.error ?? l.skipped}`),
  };
}

if (process.env.DIFFUSION_WORKER) {
  const name = process.env.DIFFUSION_WORKER;
  const side = process.env.DIFFUSION_WORKER_SIDE ?? 'dtorch';
  try {
    console.log(JSON.stringify(await measure(name, side === 'dtorch_compiled')));
  } catch (err) {
    console.log(JSON.stringify({ bench, side, model: name, device, dtype, size, error: String(err?.message ?? err).slice(0, 400) }));
    process.exitCode = 1;
  }
} else {
  await main();
}
