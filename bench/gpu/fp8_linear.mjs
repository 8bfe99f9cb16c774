#!/usr/bin/env node
// bench/gpu: FP8 linears (dt.F.fp8Linear: the row quantizing kernel, then at::_scaled_mm with
// row-wise scales) beside bfloat16 dt.F.linear at FLUX.1-dev's shapes (4,608 tokens), one GPU, in
// one run: ms per call (median of ITERS after WARMUP, each call synced), the ratio, and the FP8
// output's relative L2 error against the bfloat16 product of the dequantized weight.
//   DEVICE=cuda node bench/gpu/fp8_linear.mjs
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

const device = process.env.DEVICE ?? 'cuda';
const iters = Number(process.env.ITERS ?? 30);
const warmup = Number(process.env.WARMUP ?? 5);
const mesh = new dt.DeviceMesh(device, [0]);
const shapes = [
  { name: 'single.qkv_mlp', m: 4608, k: 3072, n: 21504 },
  { name: 'single.proj_out', m: 4608, k: 15360, n: 3072 },
  { name: 'double.ff_out', m: 4096, k: 12288, n: 3072 },
  { name: 'double.qkv', m: 4096, k: 3072, n: 9216 },
];

async function time(fn) {
  for (let i = 0; i < warmup; i++) dt.dispose(fn());
  await dt.sync();
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    const y = fn();
    await dt.sync();
    times.push(performance.now() - t0);
    y.dispose();
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

for (const { name, m, k, n } of shapes) {
  const x = dt.randn([m, k], { mesh }).to('bfloat16');
  const w = dt.randn([n, k], { mesh }).div(Math.sqrt(k)).to('bfloat16');
  const bias = dt.randn([n], { mesh }).to('bfloat16');
  const { weight: q, scale } = nn.quantizeWeightFp8(w);
  const bf16Ms = await time(() => dt.F.linear(x, w, bias));
  const fp8Ms = await time(() => dt.F.fp8Linear(x, q, scale, bias));
  const error = await dt.tidy(() => {
    const want = dt.F.linear(x.to('float32'), q.to('float32').mul(scale.unsqueeze(1)), bias.to('float32'));
    const got = dt.F.fp8Linear(x, q, scale, bias).to('float32');
    return got.sub(want).pow(2).sum().sqrt().div(want.pow(2).sum().sqrt());
  }).item();
  const tflop = (2 * m * k * n) / 1e12;
  console.log(JSON.stringify({ bench: 'fp8_linear', device, shape: name, m, k, n, bf16_ms: +bf16Ms.toFixed(4), fp8_ms: +fp8Ms.toFixed(4), speedup: +(bf16Ms / fp8Ms).toFixed(3), bf16_tflops: +(tflop / bf16Ms * 1e3).toFixed(1), fp8_tflops: +(tflop / fp8Ms * 1e3).toFixed(1), rel_l2_vs_dequantized: error }));
  dt.dispose([x, w, bias, q, scale]);
}
