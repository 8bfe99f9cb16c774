import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import { cudaSkip, machineGpuSource, machineGpus, skipNote } from '../conformance/meshes.js';
import { runNode } from './run_node.js';

describe('runtime facts', () => {
  it('reports the LibTorch the addon was built against', () => {
    const info = dt.torchInfo();
    expect(info.libtorchVersion).toMatch(/^2\.\d+\.\d+/);
    expect(info.cpuCores).toBeGreaterThan(0);
    expect(dt.describeRuntime()).toContain(`LibTorch ${info.libtorchVersion}`);
    // the devices against the machine's GPUs, counted without the addon (tests/conformance/meshes.ts):
    // a broken or CPU-only build on a GPU machine fails here
    if (machineGpuSource === 'env') expect(dt.cuda.deviceCount()).toBeGreaterThanOrEqual(1);
    else expect(dt.cuda.deviceCount()).toBe(machineGpus);
    expect(dt.cuda.isAvailable()).toBe(machineGpus > 0);
    expect(dt.cuda.devices().map((d) => d.index)).toEqual(Array.from({ length: dt.cuda.deviceCount() }, (_, i) => i));
    // a CUDA build links the NCCL LibTorch loads (the device harness builds one)
    if (info.builtWithCuda && process.env['DTORCH_EXPECT_NCCL'] === '1') expect(dt.cuda.ncclVersion()).toMatch(/^2\.\d+\.\d+$/);
    if (!info.builtWithCuda) expect(dt.cuda.ncclVersion()).toBe('');
  });

  it.skipIf(!existsSync('/proc/self/maps'))(`holds at most one NCCL: the one LibTorch loads${existsSync('/proc/self/maps') ? '' : ' (skipped: no /proc/self/maps)'}`, () => {
    const ncclFiles = new Set(readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => /libnccl/.test(l)).map((l) => l.trim().split(/\s+/).pop()));
    expect(ncclFiles.size).toBeLessThanOrEqual(1);
    if (process.env['DTORCH_EXPECT_NCCL'] === '1') expect(ncclFiles.size).toBe(1);
  });

  it('names a CUDA device it does not have when asked for its memory', () => {
    const count = dt.cuda.deviceCount();
    expect(() => dt.cuda.memoryStats(count)).toThrow(`cuda.memoryStats: there is no CUDA device ${count}; this process sees ${count}`);
    expect(() => dt.cuda.resetPeakMemoryStats(-1)).toThrow(dt.DTorchError);
    expect(() => dt.cuda.setSMCarveout(-2)).toThrow('cuda.setSMCarveout: expected a whole number of SMs in [0, 1024], got -2');
  });

  it.skipIf(cudaSkip(1))(`reports the CUDA caching allocator's counters, as torch.cuda does${skipNote(cudaSkip(1))}`, async () => {
    await dt.sync();
    const before = dt.cuda.memoryStats(0);
    dt.cuda.resetPeakMemoryStats(0);
    const mesh = new dt.DeviceMesh('cuda', [0]);
    const x = dt.zeros([16, 2 ** 20], { mesh }); // 64 MiB
    await dt.sync();
    const held = dt.cuda.memoryStats(0);
    expect(held.allocatedBytes - before.allocatedBytes).toBeGreaterThanOrEqual(64 * 2 ** 20);
    expect(held.peakAllocatedBytes).toBeGreaterThanOrEqual(held.allocatedBytes);
    expect(held.reservedBytes).toBeGreaterThanOrEqual(held.allocatedBytes);
    x.dispose();
    await dt.sync();
    const after = dt.cuda.memoryStats(0);
    expect(held.allocatedBytes - after.allocatedBytes).toBeGreaterThanOrEqual(64 * 2 ** 20);
    expect(after.peakAllocatedBytes).toBe(held.peakAllocatedBytes); // the peak stays until reset
  });

  it('gives each of N CPU workers its share of the cores, so they do not oversubscribe', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
    dt.ones([2], { mesh }).add(1);
    await dt.sync();
    const cores = dt.torchInfo().cpuCores;
    const expected = process.env['DTORCH_INTRAOP_THREADS'] ? Number(process.env['DTORCH_INTRAOP_THREADS']) : Math.max(1, Math.floor(cores / 4));
    const workers = dt.workers().filter((w) => w.device.startsWith('cpu')); // GPU workers may exist too
    expect(workers.map((w) => w.device)).toEqual(['cpu:0', 'cpu:1', 'cpu:2', 'cpu:3']);
    for (const w of workers) expect(w.intraOpThreads).toBe(expected);
  });

  it('shares the cores among the CPU workers by default (DTORCH_INTRAOP_THREADS unset)', () => {
    // the tests' vitest config sets DTORCH_INTRAOP_THREADS; a fresh process without it shows the default
    const script = `
      import * as dt from '@dtorch/api';
      const mesh = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
      dt.ones([2], { mesh }).add(1);
      await dt.sync();
      const threads = dt.workers().filter((w) => w.device.startsWith('cpu')).map((w) => w.intraOpThreads);
      console.log(JSON.stringify({ cores: dt.torchInfo().cpuCores, threads }));`;
    const r = runNode(script, { DTORCH_INTRAOP_THREADS: undefined });
    expect(r.status, r.stderr).toBe(0);
    const { cores, threads } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { cores: number; threads: number[] };
    expect(threads).toEqual(Array(4).fill(Math.max(1, Math.floor(cores / 4))));
  });
});
