// dt.cuda: what this process can use of CUDA, as torch.cuda reports it.
import {
  checkKernelTraceCounts,
  cudaMatmulTuningStats,
  cudaMemoryStats,
  resetCudaPeakMemoryStats,
  setCudaSMCarveout,
  startKernelTrace,
  stopKernelTrace,
  torchInfo,
  type CudaDevice,
  type CudaMatmulTuningStats,
  type CudaMemoryStats,
  type KernelTrace,
} from '@dtorch/external';

/** Whether the addon was built with CUDA and at least one GPU is visible. */
export function isAvailable(): boolean {
  return torchInfo().cudaDeviceCount > 0;
}

/** Number of GPUs visible to this process (0 without CUDA), as torch.cuda.device_count(). */
export function deviceCount(): number {
  return torchInfo().cudaDeviceCount;
}

/** Name, memory and compute capability of each visible GPU. */
export function devices(): CudaDevice[] {
  return torchInfo().cudaDevices;
}

/** Version of the NCCL that collectives between GPUs use ('' when the build has none). */
export function ncclVersion(): string {
  return torchInfo().ncclVersion;
}

/**
 * The CUDA caching allocator's counters for GPU `device`, as torch.cuda.memory_allocated(),
 * max_memory_allocated() and memory_reserved() report them. Await `dt.sync()` first for
 * figures that include all queued work.
 */
export function memoryStats(device = 0): CudaMemoryStats {
  return cudaMemoryStats(device);
}

/**
 * What the timed matmuls did in this process (all GPUs): on GPUs a linear's first call of each
 * shape (16-bit floats) times cuBLASLt's best candidate kernels on its own operands and keeps the
 * fastest for later calls and the CUDA graphs that capture them, where LibTorch runs the
 * heuristic's first choice. Only with `DTORCH_MATMUL_TUNING=1` (all counters stay 0 without it).
 */
export function matmulTuningStats(): CudaMatmulTuningStats {
  return cudaMatmulTuningStats();
}

/** Starts a new peak for memoryStats(device).peakAllocatedBytes. */
export function resetPeakMemoryStats(device = 0): void {
  resetCudaPeakMemoryStats(device);
}

/**
 * Leaves `sms` streaming multiprocessors free of cuBLAS matmuls (0: none, the default), so that
 * collectives queued beside a matmul (an all-gather prefetching the next layer's weights) run
 * during it rather than after it: Hopper's matmul kernels hold every SM for their whole run.
 * Process-wide, as torch._C._set_sm_carveout_experimental; costs the matmuls those SMs.
 */
export function setSMCarveout(sms: number): void {
  setCudaSMCarveout(sms);
}

/**
 * Traces what the GPUs run while `fn` runs and its promise settles (LibTorch's profiler, the
 * timeline torch.profiler records): per device the kernels, copies and fills, the time the
 * device was busy with any of them, where it sat idle between them (by the length of the gap, the
 * longest named by the work around them), and the longest kernels. For benchmarks:
 * a forward's wall time minus its busy time is the time the GPU sat idle. Await `dt.sync()`
 * inside `fn` so that the work it queued is in the trace.
 */
export async function traceKernels(fn: () => Promise<void> | void, options?: { top?: number; gaps?: number }): Promise<KernelTrace> {
  const [top, gaps] = [options?.top ?? 10, options?.gaps ?? 8];
  checkKernelTraceCounts('dt.cuda.traceKernels', top, gaps); // before the trace starts: a refused call leaves none running
  startKernelTrace();
  try {
    await fn();
  } catch (err) {
    stopKernelTrace(0, 0);
    throw err;
  }
  return stopKernelTrace(top, gaps);
}
