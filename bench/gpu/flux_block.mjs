#!/usr/bin/env node
// bench/gpu (b): one Flux-sized single transformer block (hidden 3072, 24 heads of 128, 4,608
// tokens, bf16: adaptive layer norm, q/k/v with q/k rms norm, attention, tanh-GELU MLP, output
// projection, gate and residual) forward on one GPU, DTorch and PyTorch eager (flux_block.py)
// side by side in one run. Prints JSON lines and the ratio.
//   DEVICE=cuda node bench/gpu/flux_block.mjs      (TOKENS, ITERS to change the size)
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const tokens = Number(process.env.TOKENS ?? 4608);
const iters = Number(process.env.ITERS ?? 20);
const [hidden, heads, headDim, mlpHidden] = [3072, 24, 128, 4 * 3072];
dt.setCaptureStacks(false);

const mesh = new dt.DeviceMesh(device, [0]);
const opts = (seed) => ({ seed, dtype: 'bfloat16', mesh });
const w = {
  norm: dt.randn([3 * hidden, hidden], opts(1)).mul(0.02),
  normB: dt.zeros([3 * hidden], { dtype: 'bfloat16', mesh }),
  q: dt.randn([hidden, hidden], opts(2)).mul(0.02),
  k: dt.randn([hidden, hidden], opts(3)).mul(0.02),
  v: dt.randn([hidden, hidden], opts(4)).mul(0.02),
  qkB: dt.zeros([hidden], { dtype: 'bfloat16', mesh }),
  nq: dt.ones([headDim], { dtype: 'bfloat16', mesh }),
  nk: dt.ones([headDim], { dtype: 'bfloat16', mesh }),
  mlp: dt.randn([mlpHidden, hidden], opts(5)).mul(0.02),
  mlpB: dt.zeros([mlpHidden], { dtype: 'bfloat16', mesh }),
  out: dt.randn([hidden, hidden + mlpHidden], opts(6)).mul(0.02),
  outB: dt.zeros([hidden], { dtype: 'bfloat16', mesh }),
};
const x = dt.randn([1, tokens, hidden], opts(7));
const temb = dt.randn([1, hidden], opts(8));

function block(x, temb) {
  return dt.tidy(() => {
    const [shift, scale, gate] = dt.F.linear(dt.F.silu(temb), w.norm, w.normB).chunk(3, -1);
    const nx = dt.F.layerNorm(x, [hidden], { eps: 1e-6 }).mul(scale.add(1).unsqueeze(1)).add(shift.unsqueeze(1));
    const mlp = dt.F.gelu(dt.F.linear(nx, w.mlp, w.mlpB), { approximate: 'tanh' });
    const headsOf = (t) => t.reshape([1, tokens, heads, headDim]).transpose(1, 2);
    const q = dt.F.rmsNorm(headsOf(dt.F.linear(nx, w.q, w.qkB)), [headDim], { weight: w.nq, eps: 1e-6 });
    const k = dt.F.rmsNorm(headsOf(dt.F.linear(nx, w.k, w.qkB)), [headDim], { weight: w.nk, eps: 1e-6 });
    const v = headsOf(dt.F.linear(nx, w.v, w.qkB));
    const attn = dt.F.scaledDotProductAttention(q, k, v).transpose(1, 2).reshape([1, tokens, hidden]);
    const h = dt.F.linear(dt.cat([attn, mlp], 2), w.out, w.outB);
    return x.add(gate.unsqueeze(1).mul(h));
  });
}

// Each output is released only after its segment went to the controller (the `await` ends the
// JS task, which flushes): an output released unread in its own segment would be dead code,
// which the controller rightly never runs. At most two outputs live at once, as in PyTorch's loop.
async function forwards(n) {
  let previous;
  for (let i = 0; i < n; i++) {
    const out = block(x, temb);
    await null;
    previous?.dispose();
    previous = out;
  }
  await dt.sync();
  previous.dispose();
}
await forwards(3); // warm up: kernels, allocator
dt.resetPeakMemory();
const start = process.hrtime.bigint();
await forwards(iters);
const ms = Number(process.hrtime.bigint() - start) / 1e6 / iters;
const checksum = await block(x, temb).to('float32').abs().mean().item();
const ours = { bench: 'gpu_flux_block', side: 'dtorch', device, tokens, iters, ms_per_forward: +ms.toFixed(3), checksum, peak_bytes: Math.max(...dt.memory().perDevice.map((d) => d.peakBytes)) };
console.log(JSON.stringify(ours));

const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
const r = spawnSync(python, ['-W', 'ignore', join(here, 'flux_block.py'), device, String(tokens), String(iters)], { encoding: 'utf8' });
if (r.status !== 0) {
  console.log(JSON.stringify({ bench: 'gpu_flux_block', side: 'pytorch_eager', error: r.stderr.trim().split('\n').pop() }));
} else {
  const theirs = JSON.parse(r.stdout.trim().split('\n').pop());
  console.log(JSON.stringify(theirs));
  console.log(JSON.stringify({ bench: 'gpu_flux_block', summary: true, device, tokens, ratio_vs_pytorch: +(ms / theirs.ms_per_forward).toFixed(3), target: 1.0 }));
}
