#!/usr/bin/env node
// bench/cluster: the op stream and Gloo between processes, each beside the same work in this
// process, in one run. This process is the main node (offering cpu:0 and cpu:1) and starts 2
// `dtorch worker` children on 127.0.0.1 with 2 CPU devices each. Prints one JSON line per case:
//   ops_per_s:     `x = x.add(1)` on a [1] tensor, recorded ITERS times on a mesh over the
//                  workers' 4 devices and then read (await x.data()): ops per second end to end,
//                  the best of REPEATS; anchor: the same loop on a 1-device mesh of this process
//   read_median_ms, read_p90_ms: `await t.data()` of a small replicated tensor answered by a
//                  worker (rank 0 on node 1); anchor: answered here
//   allreduce_gbps: Partial(sum) -> Replicate of a float32 tensor on a mesh of one device per
//                  worker (a Gloo group between the processes), algorithm bandwidth (tensor
//                  bytes / time per all-reduce, the best of REPEATS loops of 16 (4 MiB) or 4
//                  (32 MiB)); anchor: a mesh of this process's 2 devices
// `ratio` is value / anchor (for ops and bandwidth below 1: the cluster is slower; for reads
// above 1: the cluster is slower). Every child is killed at the end, also when a case fails.
// Usage: node bench/cluster/op_stream.mjs   (ITERS, READS, REPEATS env to change the size)
import { spawn, execSync } from 'node:child_process';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dtorchBin = join(root, 'packages', 'hf', 'bin', 'dtorch.js');
const iters = Number(process.env.ITERS ?? 20_000);
const reads = Number(process.env.READS ?? 200);
const repeats = Number(process.env.REPEATS ?? 5);
const sizesMiB = [4, 32];
dt.setCaptureStacks(false);

const commit = (() => {
  try {
    return execSync('git rev-parse --short HEAD', { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
})();
const machine = `${os.hostname()}/${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}`;
const date = new Date().toISOString();

function print(row) {
  const ratio = row.anchor ? +(row.value / row.anchor).toFixed(3) : null;
  console.log(JSON.stringify({ bench: 'cluster/op_stream', ...row, ratio, commit, date, machine }));
}

// ---- the worker processes: killed on every way out ----------------------------------------

const workers = [];
function startWorker(address) {
  const child = spawn(process.execPath, [dtorchBin, 'worker', '--main', address, '--devices', 'cpu:0-1'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  workers.push({ child, exited, output: () => output });
}
function killWorkers() {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
}
process.on('exit', killWorkers);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killWorkers();
    process.exit(1);
  });
}
// a hung collective or read must not hang the run (DTORCH_COLLECTIVE_TIMEOUT_MS is 10 minutes)
const watchdog = setTimeout(() => {
  console.error('bench/cluster: no result within 180 s; killing the workers');
  for (const w of workers) console.error(w.output());
  process.exit(1);
}, 180_000);
watchdog.unref();

// ---- the cases ------------------------------------------------------------------------------

async function opsPerSecond(mesh) {
  let x = dt.zeros([1], { mesh });
  await x.data();
  const start = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    const next = x.add(1);
    x.dispose();
    x = next;
  }
  const value = (await x.data())[0];
  const ns = Number(process.hrtime.bigint() - start);
  x.dispose();
  if (value !== iters) throw new Error(`ops on ${mesh}: x is ${value}, not ${iters}`);
  return (iters * 1e9) / ns;
}

async function readTimes(mesh) {
  const t = dt.ones([8], { mesh });
  await t.data(); // the tensor exists on every rank before the timing
  const ms = [];
  for (let i = 0; i < reads; i++) {
    const start = process.hrtime.bigint();
    await t.data();
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  t.dispose();
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))];
  return { median: at(0.5), p90: at(0.9) };
}

// best of `repeats` timed loops of k all-reduces; GB/s of tensor bytes per all-reduce
async function allReduceGbps(mesh, bytes, k) {
  const x = dt.ones([bytes / 4 / 256, 256], { mesh, placements: [dt.Partial()] });
  const warm = x.redistribute([dt.Replicate()]); // warm up: the group meets once
  const value = (await warm.data())[0]; // ones as partial sums: the ranks' parts add up to 1
  warm.dispose();
  if (value !== 1) throw new Error(`all-reduce on ${mesh}: ${value}, not 1`);
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const start = process.hrtime.bigint();
    // the results stay alive until synced: the controller skips a node whose outputs are released unread
    const ys = [];
    for (let i = 0; i < k; i++) ys.push(x.redistribute([dt.Replicate()]));
    await dt.sync();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / k);
    dt.dispose(ys);
  }
  x.dispose();
  return bytes / best; // bytes per ns = GB/s
}

let failed = false;
try {
  await dt.cluster.start({
    workers: 2,
    devices: [
      { kind: 'cpu', index: 0 },
      { kind: 'cpu', index: 1 },
    ],
    joinTimeoutMs: 30_000,
    onListening: (address) => {
      startWorker(address);
      startWorker(address);
    },
  });
  const cpus = dt.cluster.devices('cpu');
  const local = cpus.filter((d) => d.node === 0).map((d) => d.index);
  const remote = cpus.filter((d) => d.node !== 0).map((d) => d.index);
  const firstOfEach = [...new Set(cpus.filter((d) => d.node !== 0).map((d) => d.node))].map((n) => cpus.find((d) => d.node === n).index);
  if (local.length !== 2 || remote.length !== 4 || firstOfEach.length !== 2) {
    throw new Error(`unexpected cluster devices: ${JSON.stringify(cpus.map((d) => `${d.node}/${d.device}=${d.index}`))}`);
  }
  const here = new dt.DeviceMesh('cpu', [local[0]]);
  const workersMesh = new dt.DeviceMesh('cpu', remote);
  const acrossMesh = new dt.DeviceMesh('cpu', firstOfEach);
  const localPair = new dt.DeviceMesh('cpu', local);

  // one untimed pass of each loop: JIT, heap, the workers' sub-controllers
  await opsPerSecond(here);
  await opsPerSecond(workersMesh);
  let [anchorOps, clusterOps] = [0, 0];
  for (let r = 0; r < repeats; r++) {
    anchorOps = Math.max(anchorOps, await opsPerSecond(here));
    clusterOps = Math.max(clusterOps, await opsPerSecond(workersMesh));
  }
  print({ case: 'ops_per_s', mesh: String(workersMesh), ops: iters, value: Math.round(clusterOps), unit: 'ops/s', anchor: Math.round(anchorOps), anchor_mesh: String(here) });

  const anchorRead = await readTimes(here);
  const clusterRead = await readTimes(workersMesh);
  for (const q of ['median', 'p90']) {
    print({ case: `read_${q}_ms`, mesh: String(workersMesh), reads, value: +clusterRead[q].toFixed(4), unit: 'ms', anchor: +anchorRead[q].toFixed(4), anchor_mesh: String(here) });
  }

  for (const mib of sizesMiB) {
    const bytes = mib * 1024 * 1024;
    const k = mib <= 4 ? 16 : 4;
    const anchor = await allReduceGbps(localPair, bytes, k);
    const value = await allReduceGbps(acrossMesh, bytes, k);
    print({ case: 'allreduce_gbps', mesh: String(acrossMesh), tensor_bytes: bytes, per_loop: k, value: +value.toFixed(3), unit: 'GB/s', anchor: +anchor.toFixed(3), anchor_mesh: String(localPair) });
  }
} catch (err) {
  failed = true;
  console.log(JSON.stringify({ bench: 'cluster/op_stream', error: String(err?.message ?? err).split('\n')[0], commit, date, machine }));
  for (const w of workers) console.error(w.output());
} finally {
  await dt.cluster.shutdown('bench done').catch(() => {});
  const exits = Promise.all(workers.map((w) => w.exited));
  await Promise.race([exits, new Promise((r) => setTimeout(r, 5000).unref())]);
  killWorkers();
}
process.exit(failed ? 1 : 0);
