#!/usr/bin/env node
// bench/hf: LoRA adapters on FLUX.1-dev's transformer (issue 42's figures), DTorch beside diffusers
// (PEFT) in one run, at full size with random weights, bfloat16, one denoising step at 1024x1024.
// diffusers' side (lora.py, eager) writes a LoRA on every linear for each rank (RANKS, default
// 16,64; diffusers' layout, bfloat16) and times its own load_lora_adapter, the step unfused, fuse_lora
// and the fused step; DTorch's side (a process of its own, after it) loads the same files with
// FluxTransformer2DModel.loadLoraAdapter into the compiled model (model.compile(), how a pipeline
// runs it) and times the same: the step without the adapter, the load (from a warm page cache),
// the step unfused, fuseLora, the fused step, unfuseLora; then unloadLora and the memory after.
// Per rank a summary line: overhead_unfused = unfused / base - 1 for each side (issue 42: at most
// 0.05 at rank 16), fuse_s (at most 1 s), load_s and load_mib_per_s (200 MB in at most 1 s), and
// whether the memory came back (dt.memory() and the allocator's bytes before the load and after
// the unload). Also how many graphs the switch of adapters captured again (graphs_*), and on GPUs
// where the unfused adapters' time goes: the kernels that grew most over a traced base step (kernels_added),
// and what the timed matmuls chose so far (matmul_tuning: dt.cuda.matmulTuningStats).
// The card's clock drifts over a run by as much as the effect (the same base step measured before
// the load and after the unload differs by up to 2 ms on an H100), so DTorch's side also times the
// step with the adapters disabled (disableLora) and enabled, alternately, ROUNDS times (default 3):
// overhead_interleaved is the median of the rounds' unfused / disabled - 1, each pair measured
// back to back; target_overhead_met reads it.
//   DEVICE=cuda node bench/hf/lora.mjs
//   DEVICE=cpu SIZE=tiny node bench/hf/lora.mjs
// Env: RANKS (16,64), ITERS (10), WARMUP (3), BUDGET_S (480), DIFFUSERS_SRC, PYTHON (as diffusion_models.mjs),
// VARIANTS (DTorch's side once per ';'-separated list of VAR=value settings, each line tagged with its variant),
// ROUNDS (3: disabled/enabled pairs per rank).
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import { childRuns, diffusersPython } from './child_runs.mjs';
import { fluxStepModel } from './flux_step.mjs';
import { graphCounters } from './graph_counters.mjs';

const self = fileURLToPath(import.meta.url);
const here = dirname(self);
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const size = process.env.SIZE ?? 'full';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const ranks = (process.env.RANKS ?? '16,64').split(',').map(Number);
const iters = Number(process.env.ITERS ?? 10);
const warmup = Number(process.env.WARMUP ?? 3);
const budgetS = Number(process.env.BUDGET_S ?? 480);
const rounds = Number(process.env.ROUNDS ?? 3);
const variants = (process.env.VARIANTS ?? '').split(';').map((v) => v.trim());
const dir = process.env.LORA_DIR ?? join(tmpdir(), 'dtorch-bench-lora');
const modelName = 'flux-dev';
const bench = 'hf_lora';
const GIB = 1024 ** 3;
dt.setCaptureStacks(false);

// Flux-dev's transformer, compiled, its step's inputs, and a step that waits for the device
function build() {
  const { model, x, options } = fluxStepModel({ device, size, dtype });
  const once = async () => {
    const out = model.call(x, options);
    await dt.sync();
    dt.dispose(out);
  };
  return { model, once };
}

// the best and median of `iters` steps after `warmup`
async function time(once) {
  for (let i = 0; i < warmup; i++) await once();
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await once();
    times.push(performance.now() - t0);
  }
  const sorted = times.sort((a, b) => a - b);
  return { ms: +sorted[0].toFixed(3), median_ms: +sorted[Math.floor(sorted.length / 2)].toFixed(3) };
}

async function seconds(call) {
  const t0 = performance.now();
  await call();
  await dt.sync();
  return +((performance.now() - t0) / 1000).toFixed(3);
}

const allocated = () => (device === 'cuda' ? dt.cuda.memoryStats(0).allocatedBytes : null);

// One traced step on a GPU (dt.cuda.traceKernels): the device's busy and idle time, events, and
// milliseconds by kernel name; null on CPUs.
async function kernels(once) {
  if (device !== 'cuda') return null;
  const trace = await dt.cuda.traceKernels(once, { top: 100000 });
  const d = trace.devices[0];
  const byName = new Map(trace.top.map((k) => [k.name, { ms: k.totalMs, calls: k.calls }]));
  return { events: d.events, busy_ms: d.busyMs, span_ms: d.spanMs, idle_short_ms: d.idleByGap.shortMs, byName };
}

// kernel name -> class (matmul, copy, elementwise, ...), as the other bench/hf traces split them
const categories = JSON.parse(readFileSync(join(here, 'kernel_categories.json'), 'utf8')).categories.map(([c, p]) => [c, new RegExp(p, 'i')]);
const classOf = (name) => categories.find(([, p]) => p.test(name))?.[0] ?? 'other';

// Where the adapters' time goes: milliseconds and calls added per kernel class from `base` to
// `lora` (a kernel renamed by other shapes moves within its class), the kernels that grew and
// shrank most, and the device's busy time and events added.
function kernelGrowth(base, lora) {
  if (!base || !lora) return null;
  const names = new Set([...base.byName.keys(), ...lora.byName.keys()]);
  const changes = [...names].map((name) => {
    const [b, l] = [base.byName.get(name), lora.byName.get(name)];
    return { name, ms: (l?.ms ?? 0) - (b?.ms ?? 0), calls: (l?.calls ?? 0) - (b?.calls ?? 0) };
  });
  const byClass = {};
  for (const c of changes) {
    const k = (byClass[classOf(c.name)] ??= { ms: 0, calls: 0 });
    k.ms += c.ms;
    k.calls += c.calls;
  }
  const round = (c) => ({ name: c.name.slice(0, 110), ms: +c.ms.toFixed(3), calls: c.calls });
  changes.sort((x, y) => y.ms - x.ms);
  return {
    busy_ms_added: +(lora.busy_ms - base.busy_ms).toFixed(3), span_ms_added: +(lora.span_ms - base.span_ms).toFixed(3),
    events_added: lora.events - base.events, idle_short_ms_added: +(lora.idle_short_ms - base.idle_short_ms).toFixed(3),
    by_class: Object.fromEntries(Object.entries(byClass).map(([k, v]) => [k, { ms: +v.ms.toFixed(3), calls: v.calls }])),
    grown: changes.slice(0, 12).map(round), shrunk: changes.slice(-8).reverse().map(round),
  };
}

// DTorch's side (a worker process): every rank's file, as diffusers' side wrote it
async function measure() {
  const { model, once } = build();
  const base = await time(once);
  const baseKernels = await kernels(once);
  const common = { bench, side: 'dtorch_compiled', model: modelName, device, dtype, size };
  console.log(JSON.stringify({ ...common, phase: 'base', latency_ms: base.ms, median_ms: base.median_ms, graphs: graphCounters(), matmul_tuning: dt.cuda.matmulTuningStats() }));
  for (const rank of ranks) {
    const file = join(dir, `${modelName}-${size}-r${rank}.safetensors`);
    await dt.sync();
    const before = { ...dt.memory(), allocated: allocated() };
    const loadS = await seconds(() => model.loadLoraAdapter(file, { adapterName: `r${rank}` }));
    const graphsBefore = graphCounters();
    const unfused = await time(once);
    const graphsUnfused = graphCounters();
    const growth = kernelGrowth(baseKernels, await kernels(once));
    // disabled and enabled back to back (see the file's comment): the ratio of each pair
    const pairs = [];
    for (let r = 0; r < rounds; r++) {
      model.disableLora();
      const off = await time(once);
      model.enableLora();
      const on = await time(once);
      pairs.push({ disabled_ms: off.ms, unfused_ms: on.ms, overhead: +(on.ms / off.ms - 1).toFixed(4) });
    }
    const overheads = pairs.map((p) => p.overhead).sort((a, b) => a - b);
    const fuseS = await seconds(() => model.fuseLora());
    const fused = await time(once);
    const unfuseS = await seconds(() => model.unfuseLora());
    // back to the unfused adapter: only what read the adapted weights is traced again
    const again = await time(once);
    model.unloadLora();
    const unloaded = await time(once);
    await dt.sync();
    const after = { ...dt.memory(), allocated: allocated() };
    console.log(JSON.stringify({
      ...common, phase: 'lora', rank, file,
      base_ms: base.ms, unfused_ms: unfused.ms, unfused_median_ms: unfused.median_ms, fused_ms: fused.ms, unfused_again_ms: again.ms, unloaded_ms: unloaded.ms,
      overhead_unfused: +(unfused.ms / base.ms - 1).toFixed(4), rounds: pairs,
      overhead_interleaved: pairs.length ? overheads[Math.floor((overheads.length - 1) / 2)] : null, load_s: loadS, fuse_s: fuseS, unfuse_s: unfuseS,
      tensors_before_load: before.numTensors, tensors_after_unload: after.numTensors, bytes_before_load: before.numBytes, bytes_after_unload: after.numBytes,
      held_gib_before_load: before.allocated === null ? null : +(before.allocated / GIB).toFixed(3),
      held_gib_after_unload: after.allocated === null ? null : +(after.allocated / GIB).toFixed(3),
      graphs_before_unfused: graphsBefore, graphs_after_unfused: graphsUnfused, graphs: graphCounters(), kernels_added: growth,
      matmul_tuning: dt.cuda.matmulTuningStats(),
    }));
  }
  model.dispose();
}

async function main() {
  mkdirSync(dir, { recursive: true });
  const children = childRuns(budgetS, { bench, device, size });
  const lines = [];
  const emit = (ls) => {
    for (const l of ls) {
      lines.push(l);
      console.log(JSON.stringify(l));
    }
  };
  const { python, env } = diffusersPython(root);
  emit(children.run(python, ['-W', 'ignore', join(here, 'lora.py'), '--model', modelName, '--device', device, '--size', size, '--ranks', ranks.join(','),
    '--iters', String(iters), '--warmup', String(warmup), '--dir', dir], env, { side: 'diffusers_eager' }));
  // DTorch's side once per variant (VARIANTS: ';'-separated environments, e.g. 'DTORCH_FUSION=0')
  for (const variant of variants) {
    const env = Object.fromEntries(variant.split(/\s+/).filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    if (children.left() > 10) emit(children.run(process.execPath, [self], { LORA_WORKER: '1', LORA_DIR: dir, ...env }, { side: 'dtorch_compiled' }).map((l) => ({ ...l, variant })));
  }
  for (const [rank, variant] of ranks.flatMap((r) => variants.map((v) => [r, v]))) {
    const ours = lines.find((l) => l.side === 'dtorch_compiled' && l.rank === rank && l.variant === variant);
    const theirs = lines.find((l) => l.side === 'diffusers_eager' && l.rank === rank);
    const mib = theirs?.file_mib ?? null;
    const full = size === 'full' && device === 'cuda';
    console.log(JSON.stringify({
      bench, summary: true, model: modelName, device, dtype, size, rank, variant, file_mib: mib,
      dtorch_base_ms: ours?.base_ms ?? null, dtorch_unfused_ms: ours?.unfused_ms ?? null, dtorch_fused_ms: ours?.fused_ms ?? null,
      dtorch_overhead_unfused: ours?.overhead_unfused ?? null, dtorch_overhead_interleaved: ours?.overhead_interleaved ?? null, diffusers_base_ms: theirs?.base_ms ?? null, diffusers_unfused_ms: theirs?.unfused_ms ?? null,
      diffusers_fused_ms: theirs?.fused_ms ?? null, diffusers_overhead_unfused: theirs?.overhead_unfused ?? null,
      ratio_unfused_vs_diffusers: ours && theirs ? +(ours.unfused_ms / theirs.unfused_ms).toFixed(3) : null,
      dtorch_fuse_s: ours?.fuse_s ?? null, diffusers_fuse_s: theirs?.fuse_s ?? null, dtorch_unfuse_s: ours?.unfuse_s ?? null,
      dtorch_load_s: ours?.load_s ?? null, diffusers_load_s: theirs?.load_s ?? null,
      dtorch_load_mib_per_s: ours && mib ? +(mib / ours.load_s).toFixed(1) : null,
      memory_back: ours ? ours.tensors_after_unload === ours.tensors_before_load && ours.bytes_after_unload === ours.bytes_before_load : null,
      allocator_back: ours?.held_gib_after_unload != null ? ours.held_gib_after_unload <= ours.held_gib_before_load : null,
      target_overhead_met: full && rank === 16 && ours?.overhead_interleaved != null ? ours.overhead_interleaved <= 0.05 : null,
      target_fuse_met: full && ours ? ours.fuse_s <= 1 : null,
      target_load_met: full && ours && mib ? ours.load_s <= Math.max(1, mib / 200) : null,
      errors: lines.filter((l) => l.error).map((l) => `${l.side}: ${l.error}`),
    }));
  }
  console.log(JSON.stringify({ bench, done: true, device, size, ranks, wall_s: +children.elapsedS().toFixed(1) }));
}

if (process.env.LORA_WORKER) {
  try {
    await measure();
  } catch (err) {
    console.log(JSON.stringify({ bench, side: 'dtorch_compiled', model: modelName, device, dtype, size, error: String(err?.stack ?? err).slice(0, 600) }));
    process.exitCode = 1;
  }
} else {
  await main();
}
