#!/usr/bin/env node
// bench/overhead: per-op cost of `x = x.add(1)` on shape [1], CPU, 1 device, with DTorch,
// LibTorch direct (C++ loop, built with the addon) and PyTorch eager (the setup's torch),
// side by side in one run. Prints one JSON line per side and one line of ratios.
// Usage: npm run bench -w @dtorch/bench   (ITERS, REPEATS env to change the size)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runDTorchSide } from './dtorch_side.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const iters = Number(process.env.ITERS ?? 200_000);
const repeats = Number(process.env.REPEATS ?? 5);
const device = process.env.DEVICE ?? 'cpu'; // DEVICE=cuda on the GPU machine

// Runs a side's program; returns its JSON lines by side name.
function runJsonLines(cmd, args, side) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) {
    console.log(JSON.stringify({ bench: 'overhead', side, error: (r.stderr || r.error?.message || 'failed').trim().split('\n').pop() }));
    return {};
  }
  const rows = {};
  for (const line of r.stdout.trim().split('\n')) {
    console.log(line);
    const row = JSON.parse(line);
    rows[row.side] = row;
  }
  return rows;
}

const libtorchBin = join(root, 'build', 'dtorch_bench_overhead');
const direct = existsSync(libtorchBin)
  ? runJsonLines(libtorchBin, [String(iters), String(repeats), device], 'libtorch_direct')
  : (console.log(JSON.stringify({ bench: 'overhead', side: 'libtorch_direct', error: 'not built: run npm run build:native' })), {});
const libtorch = direct.libtorch_direct;
// Diagnostic: the same C++ loop while this JS thread allocates as a recording loop does, to
// show how much a busy neighbour core slows LibTorch itself on this machine.
async function libtorchWithBusyJs() {
  if (!existsSync(libtorchBin)) return undefined;
  const child = spawn(libtorchBin, [String(iters), String(repeats)]);
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  let done = false;
  const exited = new Promise((resolve) => child.on('close', () => resolve((done = true))));
  let sink = [];
  while (!done) {
    for (let i = 0; i < 20000; i++) sink.push({ id: i, shape: [1] });
    if (sink.length > 200000) sink = [];
    await new Promise((r) => setImmediate(r));
  }
  await exited;
  const row = { ...JSON.parse(stdout.trim().split('\n')[0]), side: 'libtorch_direct_next_to_busy_js' };
  console.log(JSON.stringify(row));
  return row;
}
if (device === 'cpu') await libtorchWithBusyJs();

const python = existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3';
const pytorch = runJsonLines(python, ['-W', 'ignore', join(here, 'pytorch_eager.py'), String(iters), String(repeats), device], 'pytorch_eager')
  .pytorch_eager;
const ours = await runDTorchSide(iters, repeats, device);
for (const row of ours) console.log(JSON.stringify(row));

const ratio = (a, b) => (a && b ? +(a / b).toFixed(3) : null);
for (const row of ours) {
  console.log(
    JSON.stringify({
      bench: 'overhead',
      summary: true,
      device,
      capture_stacks: row.capture_stacks,
      record_ns: row.record_ns,
      record_target_ns: 1000,
      record_met: row.record_ns <= 1000,
      completion_vs_libtorch: ratio(row.completion_ns, libtorch?.ns_per_op),
      completion_target_ratio: 1.1,
      completion_met: libtorch ? row.completion_ns <= 1.1 * libtorch.ns_per_op : null,
      completion_vs_libtorch_out: ratio(row.completion_ns, direct.libtorch_direct_out?.ns_per_op),
      completion_vs_pytorch: ratio(row.completion_ns, pytorch?.ns_per_op),
      // issue 20: a chain of small ops replayed from CUDA graphs costs at most 2 µs per op
      ...(device === 'cuda' ? { replayed_chain_target_ns: 2000, replayed_chain_met: row.completion_ns <= 2000 && row.graph_replays > 0 } : {}),
    }),
  );
}
