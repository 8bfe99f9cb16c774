#!/usr/bin/env node
// Where a small text encoder's time goes on a GPU (bench/hf's CLIP-L is launch-bound: its GPU is
// busy 0.6 of 6 ms). Per op, pipelined: a chain of PER_OP applications (each output feeds the
// next and is released after it, as in a model; the last is read), DTorch beside PyTorch eager
// (overhead_probe.py) on CLIP-L's shapes: linear with bias, layer norm, causal attention, add,
// and four views (reshape, transpose, and back). JSON lines.
//   DEVICE=cuda node bench/hf/overhead_probe.mjs
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const n = Number(process.env.PER_OP ?? 2000);
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
dt.setCaptureStacks(false);
const mesh = new dt.DeviceMesh(device, [0]);
const x = dt.randn([1, 77, 768], { mesh, dtype, seed: 1 });
const w = dt.randn([768, 768], { mesh, dtype, seed: 2 }).mul(0.02);
const b = dt.zeros([768], { mesh, dtype });
const lnw = dt.ones([768], { mesh, dtype });
const q = dt.randn([1, 12, 77, 64], { mesh, dtype, seed: 3 });

// each maps a tensor to one of the same shape
const ops = {
  linear: [x, (t) => dt.F.linear(t, w, b)],
  layer_norm: [x, (t) => dt.F.layerNorm(t, [768], { weight: lnw, bias: b })],
  sdpa_causal: [q, (t) => dt.F.scaledDotProductAttention(t, q, q, { isCausal: true })],
  add: [x, (t) => t.add(x)],
  four_views: [x, (t) => dt.tidy(() => t.reshape([1, 77, 12, 64]).transpose(1, 2).transpose(1, 2).reshape([1, 77, 768]))],
};

async function perOp([first, fn]) {
  let t = first;
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const next = fn(t);
    if (t !== first) t.dispose(); // its last use was just recorded
    t = next;
    if (i % 64 === 63) await null; // the JS task ends now and then, as between a model's awaits
  }
  await t.data();
  const us = Number(process.hrtime.bigint() - start) / 1e3 / n;
  t.dispose();
  return us;
}

const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
const r = spawnSync(python, ['-W', 'ignore', join(here, 'overhead_probe.py'), device, String(n)], { encoding: 'utf8' });
const theirs = r.status === 0 ? JSON.parse(r.stdout.trim().split('\n').pop()) : { error: r.stderr.trim().split('\n').pop() };
for (const [name, op] of Object.entries(ops)) {
  await perOp(op); // warm up
  const us = Math.min(await perOp(op), await perOp(op));
  const pytorch = theirs[name];
  console.log(JSON.stringify({ bench: 'hf_overhead_probe', op: name, device, dtype, dtorch_us: +us.toFixed(2), pytorch_eager_us: pytorch ?? null, ratio: pytorch ? +(us / pytorch).toFixed(3) : null }));
}
if (theirs.error) console.log(JSON.stringify({ bench: 'hf_overhead_probe', side: 'pytorch_eager', error: theirs.error }));
