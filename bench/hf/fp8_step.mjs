#!/usr/bin/env node
// bench/hf: FLUX.1-dev's transformer (1024x1024: 4,096 image + 512 text tokens) in bfloat16 and
// with FP8 linears (model.quantize('fp8'), issue 44), full size with random weights, compiled, on
// one device, in one process: the same model quantized in place after its bfloat16 figures. Per
// precision: one step's latency (best and median of ITERS after WARMUP), the allocator's held and
// peak bytes, and a kernel trace by category; then the FP8 step's output against the bfloat16 one
// (relative L2), and the latents after STEPS Euler steps of a flow-matching loop (x -= dt · v, the
// same start, timesteps and guidance) against the bfloat16 loop's (cosine, relative L2). diffusers'
// side is BENCH=diffusion (diffusion_models.mjs, flux-dev) in the same device call.
//   DEVICE=cuda node bench/hf/fp8_step.mjs
//   DEVICE=cpu SIZE=tiny node bench/hf/fp8_step.mjs
// Env: ITERS (10), WARMUP (3), STEPS (28), TRACE (1).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import { fluxStepModel } from './flux_step.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const device = process.env.DEVICE ?? 'cuda';
const size = process.env.SIZE ?? 'full';
const iters = Number(process.env.ITERS ?? 10);
const warmup = Number(process.env.WARMUP ?? 3);
const steps = Number(process.env.STEPS ?? 28);
const traceOn = (process.env.TRACE ?? '1') !== '0' && device === 'cuda';
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const bench = 'hf_fp8_step';
const GIB = 1024 ** 3;
dt.setCaptureStacks(false);

const categories = JSON.parse(readFileSync(join(here, 'kernel_categories.json'), 'utf8')).categories.map(([c, p]) => [c, new RegExp(p, 'i')]);
const { model, x: x0, options: base, inputs } = fluxStepModel({ device, size, dtype });
dt.keep(x0);
for (const t of Object.values(base)) dt.keep(t);
const b = inputs.batch;
const f32 = { mesh: model.mesh, dtype: 'float32' };
const step = (x, time = base.timestep) => model.call(x, { ...base, timestep: time });

async function timeStep() {
  const once = async () => {
    const y = step(x0);
    await dt.sync();
    y.dispose();
  };
  for (let i = 0; i < warmup; i++) await once();
  const cuda = device === 'cuda';
  const held = cuda ? dt.cuda.memoryStats(0).allocatedBytes : null;
  if (cuda) dt.cuda.resetPeakMemoryStats(0);
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await once();
    times.push(performance.now() - t0);
  }
  const peak = cuda ? dt.cuda.memoryStats(0).peakAllocatedBytes : null;
  times.sort((a, c) => a - c);
  let kernelMs = null;
  if (traceOn) {
    const trace = await dt.cuda.traceKernels(once, { top: 100000 });
    const ms = {};
    for (const k of trace.top) {
      const c = categories.find(([, p]) => p.test(k.name))?.[0] ?? 'other';
      ms[c] = +((ms[c] ?? 0) + k.totalMs).toFixed(3);
    }
    kernelMs = ms;
  }
  return {
    ms: +times[0].toFixed(3), median_ms: +times[Math.floor(times.length / 2)].toFixed(3),
    held_gib: held === null ? null : +(held / GIB).toFixed(3), peak_gib: peak === null ? null : +(peak / GIB).toFixed(3), kernel_ms: kernelMs,
  };
}

// STEPS Euler steps of flow matching from x0 (sigmas 1 -> 0, timestep = sigma as FluxPipeline passes it / 1000)
async function loop() {
  let x = x0;
  for (let i = 0; i < steps; i++) {
    const [s, next] = [1 - i / steps, 1 - (i + 1) / steps];
    const time = dt.full([b], s, f32);
    const v = step(x, time);
    const moved = dt.tidy(() => x.add(v.mul(next - s)));
    dt.dispose([v, time, ...(x === x0 ? [] : [x])]);
    x = moved;
  }
  const out = dt.keep(x.to('float32'));
  x.dispose();
  return out;
}

const stats = (a, want) => dt.tidy(() => {
  const diff = a.sub(want);
  return [diff.pow(2).sum().sqrt().div(want.pow(2).sum().sqrt()), a.mul(want).sum().div(a.pow(2).sum().sqrt().mul(want.pow(2).sum().sqrt()))];
});
const numbers = async (ts) => Promise.all(ts.map(async (x) => {
  const v = await x.item();
  x.dispose();
  return v;
}));

const bf16 = await timeStep();
const yBf16 = dt.keep(dt.tidy(() => step(x0).to('float32')));
const loopBf16 = await loop();
console.log(JSON.stringify({ bench, side: 'dtorch_bf16', device, size, ...bf16 }));
const quantized = model.quantize('fp8');
const fp8 = await timeStep();
console.log(JSON.stringify({ bench, side: 'dtorch_fp8', device, size, linears_fp8: quantized.length, ...fp8 }));
const yFp8 = dt.keep(dt.tidy(() => step(x0).to('float32')));
const [stepRelL2, stepCosine] = await numbers(stats(yFp8, yBf16));
const loopFp8 = await loop();
const [loopRelL2, loopCosine] = await numbers(stats(loopFp8, loopBf16));
console.log(JSON.stringify({
  bench, summary: true, model: 'flux-dev', device, size, dtype, steps,
  bf16_ms: bf16.ms, fp8_ms: fp8.ms, speedup: +(bf16.ms / fp8.ms).toFixed(3), bf16_held_gib: bf16.held_gib, fp8_held_gib: fp8.held_gib,
  bf16_peak_gib: bf16.peak_gib, fp8_peak_gib: fp8.peak_gib, bf16_kernel_ms: bf16.kernel_ms, fp8_kernel_ms: fp8.kernel_ms,
  step_rel_l2: +stepRelL2.toExponential(3), step_cosine: +stepCosine.toFixed(6), loop_rel_l2: +loopRelL2.toExponential(3), loop_cosine: +loopCosine.toFixed(6),
  target_step_rel_l2_met: stepRelL2 <= 3e-2, target_loop_cosine_met: loopCosine >= 0.99, target_step_ms: 80, target_step_ms_met: size === 'full' && device === 'cuda' ? fp8.ms <= 80 : null,
}));
