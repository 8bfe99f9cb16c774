// dt.cuda.traceKernels: the GPU work of a stretch of the program through LibTorch's profiler.
// Without CUDA it refuses with a clear error; on a GPU it sees the kernels the workers ran.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, machineGpus, skipNote } from '../conformance/meshes.js';

const gpus = dt.torchInfo().cudaDeviceCount;
const onGpu = cudaSkip(1);
const offGpu = gpus > 0 ? 'this process has CUDA devices' : machineGpus > 0 ? 'this machine has NVIDIA GPUs: the CUDA case runs instead' : false;

describe('dt.cuda.traceKernels', () => {
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
    // a failed fn stops the trace: the next one starts
    await expect(dt.cuda.traceKernels(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    const again = await dt.cuda.traceKernels(() => dt.sync());
    expect(again.devices.every((d) => d.events >= 0)).toBe(true);
    a.dispose();
  });
});
