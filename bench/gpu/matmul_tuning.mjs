#!/usr/bin/env node
// bench/gpu: the timed matmuls (DTORCH_MATMUL_TUNING=1: the fastest of cuBLASLt's candidates,
// timed on a shape's first call) beside LibTorch's own choice (=0: at::linear and
// at::_addmm_activation, the heuristic's first kernel), at FLUX.1-dev's 1024² shapes with an
// unfused rank-16 LoRA on every linear (issue 42): the widened matmuls ([x | A x] times [W | B]),
// the base ones, and A x. Each side in a process of its own, in one run; per shape the µs per call
// (ITERS calls queued, their outputs held to one sync: the controller drops work whose output is
// released unread; the best of ROUNDS) and the ratio; a summary weighs each shape by its calls per step.
//   DEVICE=cuda node bench/gpu/matmul_tuning.mjs      (SHAPES=name,... for some of them)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const device = process.env.DEVICE ?? 'cuda';
const iters = Number(process.env.ITERS ?? 20);
const rounds = Number(process.env.ROUNDS ?? 5);
// name, tokens, in (the product's inner size), out, row stride of x (0: in), epilogue, calls per step
const SHAPES = [
  ['double.img.qkv', 4096, 3072, 9216, 0, 'bias', 19],
  ['double.img.qkv+lora', 4096, 3072 + 48, 9216, 0, 'bias', 19],
  ['double.img.ff_in', 4096, 3072, 12288, 0, 'gelu', 19],
  ['double.img.ff_in+lora', 4096, 3072 + 16, 12288, 0, 'gelu', 19],
  ['double.img.to_out', 4096, 3072, 3072, 0, 'bias', 19],
  ['double.img.ff_out', 4096, 12288, 3072, 0, 'bias', 19],
  ['single.qkv', 4608, 3072, 9216, 0, 'bias', 38],
  ['single.qkv+lora', 4608, 3072 + 48, 9216, 3072 + 64, 'bias', 38],
  ['single.proj_mlp', 4608, 3072, 12288, 0, 'gelu', 38],
  ['single.proj_mlp+lora', 4608, 3072 + 64, 12288, 0, 'gelu', 38],
  ['ax.double.img.qkv', 4096, 3072, 48, 0, 'none', 19],
  ['ax.double.img.ff_out', 4096, 12288, 16, 0, 'none', 19],
  ['ax.single.join', 4608, 3072, 64, 0, 'none', 38],
  ['ax.single.proj_out', 4608, 15360, 16, 0, 'none', 38],
];

async function side() {
  const mesh = new dt.DeviceMesh(device, [0]);
  const only = process.env.SHAPES?.split(',');
  for (const [name, m, k, n, stride, epilogue, calls] of SHAPES.filter(([name]) => !only || only.includes(name))) {
    const width = stride || k;
    const buffer = dt.tidy(() => dt.randn([m, width], { seed: 1, mesh }).to('bfloat16'));
    const x = buffer.narrow(-1, 0, k);
    const w = dt.tidy(() => dt.randn([n, k], { seed: 2, mesh }).div(Math.sqrt(k)).to('bfloat16'));
    const b = dt.tidy(() => dt.randn([n], { seed: 3, mesh }).to('bfloat16'));
    const call = () =>
      dt.tidy(() => (epilogue === 'gelu' ? dt.F.gelu(dt.F.linear(x, w, b), { approximate: 'tanh' }) : dt.F.linear(x, w, epilogue === 'bias' ? b : undefined)));
    const queue = async (n) => {
      const outputs = Array.from({ length: n }, call);
      await dt.sync();
      dt.dispose(outputs);
    };
    await queue(3);
    let best = Infinity;
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      await queue(iters);
      best = Math.min(best, ((performance.now() - t0) * 1000) / iters);
    }
    console.log(JSON.stringify({ name, m, k, n, stride, epilogue, calls, us: +best.toFixed(1) }));
    dt.dispose([buffer, x, w, b]);
  }
  console.log(JSON.stringify({ stats: dt.cuda.matmulTuningStats() }));
}

function run(tuning) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, MATMUL_TUNING_SIDE: '1', DTORCH_MATMUL_TUNING: tuning }, encoding: 'utf8' });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  if (r.status !== 0) console.log(JSON.stringify({ bench: 'matmul_tuning', error: `side DTORCH_MATMUL_TUNING=${tuning} exited ${r.status}`, stderr: r.stderr.slice(-2000) }));
  return lines;
}

if (process.env.MATMUL_TUNING_SIDE) {
  await side();
} else {
  const gpu = dt.cuda.isAvailable() ? dt.cuda.devices()[0]?.name : 'cpu';
  const tuned = run('1');
  const heuristic = run('0');
  let [stepTuned, stepHeuristic] = [0, 0];
  for (const t of tuned.filter((l) => l.name)) {
    const h = heuristic.find((l) => l.name === t.name);
    if (!h) continue;
    stepTuned += (t.us * t.calls) / 1000;
    stepHeuristic += (h.us * h.calls) / 1000;
    console.log(JSON.stringify({ bench: 'matmul_tuning', device: gpu, ...t, us: undefined, tuned_us: t.us, libtorch_us: h.us, ratio: +(t.us / h.us).toFixed(3) }));
  }
  console.log(JSON.stringify({
    bench: 'matmul_tuning', summary: true, device: gpu, step_ms_tuned: +stepTuned.toFixed(3), step_ms_libtorch: +stepHeuristic.toFixed(3),
    saved_ms: +(stepHeuristic - stepTuned).toFixed(3), stats: tuned.find((l) => l.stats)?.stats ?? null,
  }));
}
