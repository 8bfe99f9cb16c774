#!/usr/bin/env node
// bench/gpu: FP8 linears (dt.F.fp8Linear: the row quantizing kernel, then at::_scaled_mm with
// row-wise scales) beside bfloat16 dt.F.linear at FLUX.1-dev's shapes (4,608 tokens), one GPU, in
// one run: ms per call (median of ITERS after WARMUP, each call synced), the ratio, and the FP8
// output's relative L2 error against the bfloat16 product of the dequantized weight. Then FP8
// linears fed by a tanh GELU or by adaLN's modulated norm: the producer, then the FP8 linear (the
// producer's output held past the call, so nothing fuses), against the two fused by the controller
// (gelu_fp8_linear, layer_norm_modulate_fp8_linear: the producer's kernel quantizes its rows), with
// the fused output's relative L2 from the unfused one.
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

// fn returns its output, or its output and what it held past the call (released after the sync)
async function time(fn) {
  const run = () => {
    const r = fn();
    return Array.isArray(r) ? r : [r];
  };
  for (let i = 0; i < warmup; i++) dt.dispose(run());
  await dt.sync();
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    const ys = run();
    await dt.sync();
    times.push(performance.now() - t0);
    dt.dispose(ys);
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

// the FP8 linears whose input a GELU (the MLPs' output linears) or adaLN's modulated norm (q/k/v,
// the MLPs' input linears of the double blocks) makes
const producers = [
  { name: 'double.ff_out', producer: 'gelu', m: 4096, k: 12288, n: 3072 },
  { name: 'single.proj_out.mlp', producer: 'gelu', m: 4608, k: 12288, n: 3072 },
  { name: 'double.qkv', producer: 'modulated_norm', m: 4096, k: 3072, n: 9216 },
  { name: 'double.ff_in', producer: 'modulated_norm', m: 4096, k: 3072, n: 12288 },
];
for (const { name, producer, m, k, n } of producers) {
  const h = dt.randn([1, m, k], { mesh }).to('bfloat16'); // the producer's input
  const [shift, scl] = [dt.randn([1, 1, k], { mesh }).to('bfloat16'), dt.randn([1, 1, k], { mesh }).div(4).to('bfloat16')];
  const w = dt.randn([n, k], { mesh }).div(Math.sqrt(k)).to('bfloat16');
  const bias = dt.randn([n], { mesh }).to('bfloat16');
  const { weight: q, scale } = nn.quantizeWeightFp8(w);
  const make = producer === 'gelu' ? () => dt.F.gelu(h, { approximate: 'tanh' }) : () => dt.F.layerNorm(h, [k]).mul(scl.add(1)).add(shift);
  const unfusedMs = await time(() => {
    const g = make();
    return [dt.F.fp8Linear(g, q, scale, bias), g];
  });
  const fusedMs = await time(() => dt.tidy(() => dt.F.fp8Linear(make(), q, scale, bias)));
  const g = make();
  const unfused = dt.F.fp8Linear(g, q, scale, bias);
  const fused = dt.tidy(() => dt.F.fp8Linear(make(), q, scale, bias));
  const error = await dt.tidy(() => fused.to('float32').sub(unfused.to('float32')).pow(2).sum().sqrt().div(unfused.to('float32').pow(2).sum().sqrt())).item();
  console.log(JSON.stringify({ bench: 'fp8_linear_fused_input', device, shape: name, producer, m, k, n, producer_then_fp8_ms: +unfusedMs.toFixed(4), fused_ms: +fusedMs.toFixed(4), speedup: +(unfusedMs / fusedMs).toFixed(3), rel_l2_fused_vs_unfused: error }));
  dt.dispose([h, shift, scl, w, bias, q, scale, g, unfused, fused]);
}
