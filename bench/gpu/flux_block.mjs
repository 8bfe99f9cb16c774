#!/usr/bin/env node
// bench/gpu (b), (c), (d): one Flux-sized single transformer block (hidden 3072, 24 heads of 128,
// 4,608 tokens, bf16: adaptive layer norm, q/k/v with q/k rms norm, attention, tanh-GELU MLP,
// output projection, gate and residual) forward, DTorch and PyTorch eager (flux_block.py) side by
// side in one run. Variants (VARIANTS, default single,tp,tpsp,ulysses when 2+ GPUs are present),
// the parallel ones on each GPU count in GPU_COUNTS (default: 2, 4, 8 as far as present):
//   single   1 GPU, the block as PyTorch writes it                              (b), (d)
//   tp       N GPUs, tensor parallel: q/k/v and MLP-in column-parallel (heads and MLP features
//            split), the output projection row-parallel, one all-reduce          (c)
//   tpsp     N GPUs, tensor parallel with sequence parallel norms (Megatron-SP): tokens split
//            outside the projections, an all-gather before them and a reduce-scatter after
//   asynctp  tpsp with the all-gather and the reduce-scatter inside the projections
//            (dt.F.allGatherLinear / linearReduceScatter): each GPU's own tokens are multiplied
//            while the copy engines move the peers'
//   ulysses  N GPUs, sequence parallel: tokens split, all-to-all to heads around attention (c);
//            q, k and v from one matmul (as Flux's own single block computes them), the MLP's
//            matmuls queued beside the all-to-alls, the output projection as two added products
//   ring     N GPUs, sequence parallel: tokens split, ring attention (key/value blocks passed on)
// Every variant draws the same weights (random creation is mesh-independent), so their
// checksums agree. Timing: best of ROUNDS rounds of ITERS forwards; peak memory from the CUDA
// caching allocator, the measure torch.cuda.max_memory_allocated() reports. The 2-GPU variants
// run once per SM carve-out in CARVEOUTS (SMs cuBLAS leaves free, so that a collective can run
// beside a matmul; see dt.cuda.setSMCarveout).
//   DEVICE=cuda node bench/gpu/flux_block.mjs      (TOKENS, ITERS, ROUNDS, HEADS, HEAD_DIM)
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const device = process.env.DEVICE ?? 'cuda';
const tokens = Number(process.env.TOKENS ?? 4608);
const iters = Number(process.env.ITERS ?? 50);
const rounds = Number(process.env.ROUNDS ?? 5);
const heads = Number(process.env.HEADS ?? 24);
const headDim = Number(process.env.HEAD_DIM ?? 128);
const hidden = heads * headDim;
const mlpHidden = 4 * hidden;
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
const devicesPresent = device === 'cuda' ? dt.cuda.deviceCount() : 2;
const variants = (process.env.VARIANTS ?? (devicesPresent >= 2 ? 'single,tp,tpsp,asynctp,ulysses' : 'single')).split(',');
const carveouts = (process.env.CARVEOUTS ?? (device === 'cuda' ? '0,16' : '0')).split(',').map(Number);
const gpuCounts = (process.env.GPU_COUNTS ?? [2, 4, 8].filter((n) => n <= devicesPresent).join(',')).split(',').map(Number);
dt.setCaptureStacks(false);

// The weights and inputs of one variant on `gpus` devices, placed on its mesh.
function setup(variant, gpus) {
  const dimName = variant === 'ulysses' || variant === 'ring' ? variant : 'tp';
  const mesh =
    variant === 'single' ? new dt.DeviceMesh(device, [0]) : new dt.DeviceMesh(device, Array.from({ length: gpus }, (_, i) => i), [dimName]);
  const R = [dt.Replicate()];
  const sp = variant === 'tpsp' || variant === 'asynctp';
  const tp = variant === 'tp' || sp;
  const make = (shape, seed, placements = R) => dt.tidy(() => dt.randn(shape, { seed, dtype, mesh, placements }).mul(0.02));
  const zeros = (shape, placements = R) => dt.zeros(shape, { dtype, mesh, placements });
  const column = tp ? [dt.Shard(0)] : R; // output features split over the GPUs
  const w = {
    norm: make([3 * hidden, hidden], 1),
    normB: zeros([3 * hidden]),
    q: make([hidden, hidden], 2, column),
    k: make([hidden, hidden], 3, column),
    v: make([hidden, hidden], 4, column),
    qkB: zeros([hidden], column),
    nq: dt.ones([headDim], { dtype, mesh }),
    nk: dt.ones([headDim], { dtype, mesh }),
    mlp: make([mlpHidden, hidden], 5, column),
    mlpB: zeros([mlpHidden], column),
    out: make([hidden, hidden + mlpHidden], 6),
    outB: zeros([hidden]),
  };
  if (tp) {
    // row-parallel output projection: the attention and MLP halves of its input features, each
    // split like the activations that feed them
    w.outAttn = dt.tidy(() => w.out.narrow(1, 0, hidden).contiguous().redistribute([dt.Shard(1)]));
    w.outMlp = dt.tidy(() => w.out.narrow(1, hidden, mlpHidden).contiguous().redistribute([dt.Shard(1)]));
    w.out.dispose();
    w.outBiasOnce = w.outB.redistribute([dt.Partial()]); // added by one rank: the sum has it once
  }
  const sequenceParallel = variant === 'ulysses' || variant === 'ring';
  if (sequenceParallel) {
    // q, k and v from one matmul: on each GPU's share of the tokens one [tokens/N, 3·hidden]
    // product fills the SMs in more even waves than three [tokens/N, hidden] ones (770-785 vs
    // 660-667 TFLOP/s on an H200, bench/results/gemm-shapes/h200.jsonl). The output projection by its
    // input features (attention, MLP): two products added, so that the MLP's runs while the
    // attention's output is still travelling.
    const rows = (t, start, length, dim = 0) => dt.tidy(() => t.narrow(dim, start, length).contiguous());
    w.qkv = dt.tidy(() => dt.cat([w.q, w.k, w.v], 0));
    w.qkvB = dt.tidy(() => dt.cat([w.qkB, w.qkB, w.qkB], 0));
    [w.outAttn, w.outMlp] = [rows(w.out, 0, hidden, 1), rows(w.out, hidden, mlpHidden, 1)];
    for (const t of [w.q, w.k, w.v, w.out]) t.dispose();
  }
  const x = dt.randn([1, tokens, hidden], { seed: 7, dtype, mesh, placements: sequenceParallel || sp ? [dt.Shard(1)] : R });
  const temb = dt.randn([1, hidden], { seed: 8, dtype, mesh });
  return { mesh, w, x, temb, tp, sp, fused: variant === 'asynctp', sequenceParallel };
}

const gelu = (t) => dt.F.gelu(t, { approximate: 'tanh' });
const headsOf = (t) => t.reshape([1, tokens, heads, headDim]).transpose(1, 2);

// adaptive layer norm: the normalised input and the gate for the residual
function modulate({ w, x, temb }) {
  const [shift, scale, gate] = dt.F.linear(dt.F.silu(temb), w.norm, w.normB).chunk(3, -1);
  return [dt.F.layerNorm(x, [hidden], { eps: 1e-6 }).mul(scale.add(1).unsqueeze(1)).add(shift.unsqueeze(1)), gate];
}

function block(state) {
  if (state.sequenceParallel) return sequenceParallelBlock(state);
  const { w, x, tp, sp, fused } = state;
  return dt.tidy(() => {
    const [normed, gate] = modulate(state);
    // q, k, v and MLP-in projections: asynctp gathers the tokens inside one call for all four
    const fusedOut = fused ? dt.F.allGatherLinear(normed, [w.q, w.k, w.v, w.mlp], [w.qkB, w.qkB, w.qkB, w.mlpB]) : undefined;
    const nx = fused ? undefined : sp ? normed.redistribute([dt.Replicate()]) : normed; // SP: all tokens into the projections
    const project = (i, weight, bias) => (fused ? fusedOut[i] : dt.F.linear(nx, weight, bias));
    const q = dt.F.rmsNorm(headsOf(project(0, w.q, w.qkB)), [headDim], { weight: w.nq, eps: 1e-6 });
    const k = dt.F.rmsNorm(headsOf(project(1, w.k, w.qkB)), [headDim], { weight: w.nk, eps: 1e-6 });
    const v = headsOf(project(2, w.v, w.qkB));
    const mlp = gelu(project(3, w.mlp, w.mlpB));
    const attn = dt.F.scaledDotProductAttention(q, k, v).transpose(1, 2).reshape([1, tokens, hidden]);
    let h;
    if (fused) h = dt.F.linearReduceScatter([attn, mlp], [w.outAttn, w.outMlp], { dim: 1, bias: w.outB });
    else if (tp) h = dt.F.linear(attn, w.outAttn).add(dt.F.linear(mlp, w.outMlp, w.outBiasOnce)).redistribute([sp ? dt.Shard(1) : dt.Replicate()]);
    else h = dt.F.linear(dt.cat([attn, mlp], 2), w.out, w.outB);
    return x.add(gate.unsqueeze(1).mul(h));
  });
}

// Ulysses / ring: tokens split over the GPUs everywhere but in the attention. q/k/v arrive
// sequence-sharded on a mesh dim named 'ulysses' / 'ring', so sdpa trades sequence for heads
// around the attention (all-to-alls on the copy engines), or passes key/value blocks around.
// The work is queued so that a matmul runs beside each all-to-all: the MLP's beside q/k/v's, the
// MLP's part of the output projection beside the attention's way back.
function sequenceParallelBlock(state) {
  const { w, x } = state;
  return dt.tidy(() => {
    const [nx, gate] = modulate(state);
    const qkv = dt.F.linear(nx, w.qkv, w.qkvB);
    const project = (i) => headsOf(qkv.narrow(-1, i * hidden, hidden));
    // laid out head-major before the MLP's matmul is queued, so that their all-to-alls start
    // beside it; left as transposed views, the layout copy would run on the communication stream
    // and wait for the SMs the matmul holds
    const q = dt.F.rmsNorm(project(0), [headDim], { weight: w.nq, eps: 1e-6 }).contiguous();
    const k = dt.F.rmsNorm(project(1), [headDim], { weight: w.nk, eps: 1e-6 }).contiguous();
    const v = project(2).contiguous();
    const mlp = gelu(dt.F.linear(nx, w.mlp, w.mlpB));
    const attended = dt.F.scaledDotProductAttention(q, k, v);
    const mlpOut = dt.F.linear(mlp, w.outMlp, w.outB);
    const attn = attended.transpose(1, 2).reshape([1, tokens, hidden]);
    return x.add(gate.unsqueeze(1).mul(dt.F.linear(attn, w.outAttn).add(mlpOut)));
  });
}

// Each output is released only after its segment went to the controller (the `await` ends the
// JS task, which flushes): an output released unread in its own segment would be dead code,
// which the controller rightly never runs. At most two outputs live at once, as in PyTorch's loop.
async function forwards(state, n) {
  let previous;
  for (let i = 0; i < n; i++) {
    const out = block(state);
    await null;
    previous?.dispose();
    previous = out;
  }
  await dt.sync();
  previous.dispose();
}

const gpus = (mesh) => (device === 'cuda' ? [...new Set(mesh.devices.map((d) => d.index))] : []);

// PyTorch runs before and after ours (GPU clocks drift over a run); its better figure counts
function pytorch() {
  const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
  const args = [join(here, 'flux_block.py'), device, String(tokens), String(iters), String(rounds), String(heads), String(headDim)];
  const r = spawnSync(python, ['-W', 'ignore', ...args], { encoding: 'utf8' });
  if (r.status !== 0) return { bench: 'gpu_flux_block', side: 'pytorch_eager', error: r.stderr.trim().split('\n').pop() };
  return JSON.parse(r.stdout.trim().split('\n').pop());
}
const before = pytorch();
const ours = [];
for (const [variant, gpuCount] of variants.flatMap((v) => (v === 'single' ? [[v, 1]] : gpuCounts.map((n) => [v, n])))) {
  const state = setup(variant, gpuCount);
  for (const carveout of variant === 'single' ? [0] : carveouts) {
    if (device === 'cuda') dt.cuda.setSMCarveout(carveout);
    await forwards(state, 3); // warm up: kernels, allocator, NCCL communicators
    const atRest = gpus(state.mesh).map((g) => dt.cuda.memoryStats(g).allocatedBytes); // weights, inputs
    for (const g of gpus(state.mesh)) dt.cuda.resetPeakMemoryStats(g);
    let best = Infinity;
    const heldAfterRounds = []; // GPU 0's allocated bytes after each round: a loop must not grow
    for (let r = 0; r < rounds; r++) {
      const start = process.hrtime.bigint();
      await forwards(state, iters);
      best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6 / iters);
      if (device === 'cuda') heldAfterRounds.push(dt.cuda.memoryStats(0).allocatedBytes);
    }
    const peaks = gpus(state.mesh).map((g) => dt.cuda.memoryStats(g).peakAllocatedBytes);
    const out = block(state);
    const checksum = await out.to('float32').abs().mean().item();
    out.dispose();
    ours.push({ variant, gpus: gpuCount, carveout, ms: best });
    const line = { bench: 'gpu_flux_block', side: 'dtorch', variant, gpus: state.mesh.size, sm_carveout: carveout, device, tokens, iters, rounds };
    console.log(JSON.stringify({ ...line, ms_per_forward: +best.toFixed(3), checksum, peak_bytes_per_gpu: peaks, rest_bytes_per_gpu: atRest, held_after_rounds: heldAfterRounds }));
  }
  if (device === 'cuda') dt.cuda.setSMCarveout(0);
  for (const t of [...Object.values(state.w), state.x, state.temb]) if (!t.isDisposed) t.dispose();
  await dt.sync();
}

const after = pytorch();
for (const side of [before, after]) console.log(JSON.stringify(side));
const theirs = [before, after].filter((t) => !t.error).sort((a, b) => a.ms_per_forward - b.ms_per_forward)[0];
if (theirs) {
  for (const { variant, gpus, carveout, ms } of ours) {
    const summary = { bench: 'gpu_flux_block', summary: true, variant, gpus, sm_carveout: carveout, device, tokens, pytorch_ms: theirs.ms_per_forward, ms: +ms.toFixed(3) };
    const speedup = theirs.ms_per_forward / ms;
    if (variant === 'single') console.log(JSON.stringify({ ...summary, ratio_vs_pytorch: +(ms / theirs.ms_per_forward).toFixed(3), target: 1.0 }));
    else console.log(JSON.stringify({ ...summary, speedup_vs_pytorch_1gpu: +speedup.toFixed(3), efficiency: +(speedup / gpus).toFixed(3), ...(gpus === 2 ? { target: 1.8 } : {}) }));
  }
}
