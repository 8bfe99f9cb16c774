// dt.cuda.traceKernels: the GPU work of a stretch of the program through LibTorch's profiler.
// Without CUDA it refuses with a clear error; on a GPU it sees the kernels the workers ran.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, machineGpus, skipNote } from '../conformance/meshes.js';

const gpus = dt.torchInfo().cudaDeviceCount;
const onGpu = cudaSkip(1);
const offGpu = gpus > 0 ? 'this process has CUDA devices' : machineGpus > 0 ? 'this machine has NVIDIA GPUs: the CUDA case runs instead' : false;

describe('dt.cuda.traceKernels', () => {
  it('refuses counts that are not non-negative integers before it starts a trace', async () => {
    await expect(dt.cuda.traceKernels(() => {}, { gaps: -1 })).rejects.toThrow('dt.cuda.traceKernels: expected a non-negative integer for gaps, got -1');
    await expect(dt.cuda.traceKernels(() => {}, { top: 2.5 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    // none was left running: the next trace starts (it would throw 'already running')
    if (gpus > 0) await expect(dt.cuda.traceKernels(() => dt.sync())).resolves.toHaveProperty('devices');
  });

  it.skipIf(offGpu)(`refuses without CUDA devices, and no trace is left running${skipNote(offGpu)}`, async () => {
    await expect(dt.cuda.traceKernels(() => {})).rejects.toThrow('kernel traces need CUDA devices, and this process sees none');
    await expect(dt.cuda.traceKernels(() => {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it.skipIf(onGpu)(`counts the workers' kernels and their busy time${skipNote(onGpu)}`, async () => {
    const mesh = cudaMesh(1);
    const a = dt.ones([2048, 2048], { mesh, dtype: 'bfloat16' });
    await dt.sync();
    const trace = await dt.cuda.traceKernels(async () => {
      const outs = Array.from({ length: 20 }, () => a.matmul(a));
      await dt.sync();
      dt.dispose(outs);
    });
    const device = trace.devices.find((d) => d.device === 0)!;
    expect(device.events).toBeGreaterThanOrEqual(20);
    expect(device.busyMs).toBeGreaterThan(0);
    expect(device.busyMs).toBeLessThanOrEqual(device.spanMs + 1e-6);
    expect(trace.top[0]!.calls).toBeGreaterThanOrEqual(20); // the matmul's kernel
    // the idle time within the span, split by gap length, is the span less the busy time
    const idle = device.idleByGap.shortMs + device.idleByGap.mediumMs + device.idleByGap.longMs;
    expect(idle).toBeCloseTo(device.spanMs - device.busyMs, 6);
    expect(device.longestGaps.length).toBeLessThanOrEqual(8);
    for (let i = 1; i < device.longestGaps.length; i++) expect(device.longestGaps[i]!.ms).toBeLessThanOrEqual(device.longestGaps[i - 1]!.ms);
    for (const gap of device.longestGaps) {
      expect(gap.before.length * gap.after.length).toBeGreaterThan(0);
      expect(gap.atMs).toBeGreaterThan(0);
      expect(gap.atMs + gap.ms).toBeLessThanOrEqual(device.spanMs + 1e-6);
    }
    // a gap the program makes: the device waits 30 ms for the second matmul, and the trace says so
    const waited = await dt.cuda.traceKernels(async () => {
      const first = a.matmul(a);
      await dt.sync();
      await new Promise((r) => setTimeout(r, 30));
      const second = a.matmul(a);
      await dt.sync();
      dt.dispose([first, second]);
    }, { gaps: 1 });
    const w = waited.devices.find((d) => d.device === 0)!;
    expect(w.longestGaps).toHaveLength(1);
    expect(w.longestGaps[0]!.ms).toBeGreaterThan(25);
    expect(w.idleByGap.longMs).toBeGreaterThan(25);
    // a failed fn stops the trace: the next one starts
    await expect(dt.cuda.traceKernels(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    const again = await dt.cuda.traceKernels(() => dt.sync());
    expect(again.devices.every((d) => d.events >= 0)).toBe(true);
    a.dispose();
  });
});
