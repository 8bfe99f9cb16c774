// Facts about the LibTorch the addon runs on and the devices it sees.
import { DTorchError, ErrorCode, native } from '@dtorch/common';

interface ExternalSlice {
  torchInfo(): TorchInfo;
  cudaMemoryStats(device: number): CudaMemoryStats;
  resetCudaPeakMemoryStats(device: number): void;
  setCudaSMCarveout(sms: number): void;
  startKernelTrace(): void;
  stopKernelTrace(top: number): KernelTrace;
}

export interface TorchInfo {
  /** LibTorch version the addon was built against, e.g. "2.13.0". */
  libtorchVersion: string;
  builtWithCuda: boolean;
  cudaDeviceCount: number;
  cpuCores: number;
  /** at::get_parallel_info(): OpenMP/MKL thread settings. */
  parallelInfo: string;
  cudaDevices: CudaDevice[];
  /** Version of the NCCL the addon is linked with (the one LibTorch loads); '' without NCCL. */
  ncclVersion: string;
}

/** The CUDA caching allocator's counters for one GPU (torch.cuda.memory_allocated and friends). */
export interface CudaMemoryStats {
  allocatedBytes: number;
  /** Highest allocatedBytes since the last reset (torch.cuda.max_memory_allocated). */
  peakAllocatedBytes: number;
  reservedBytes: number;
}

/** What a GPU did between startKernelTrace() and stopKernelTrace(), per device. */
export interface KernelTrace {
  devices: {
    device: number;
    /** Kernels, copies and fills that ran. */
    events: number;
    /** Time the device ran any of them (the union of their intervals). */
    busyMs: number;
    /** From the start of the first to the end of the last. */
    spanMs: number;
  }[];
  /** The kernels that took longest (all devices), with their calls and total time. */
  top: { name: string; calls: number; totalMs: number }[];
}

export interface CudaDevice {
  index: number;
  name: string;
  /** Bytes. */
  totalMemory: number;
  computeCapability: string;
}

function slice(): ExternalSlice {
  return native()['external'] as ExternalSlice;
}

export function torchInfo(): TorchInfo {
  return slice().torchInfo();
}

function checkCudaDevice(device: number, fn: string): void {
  const count = torchInfo().cudaDeviceCount;
  if (!Number.isInteger(device) || device < 0 || device >= count) {
    throw new DTorchError(
      ErrorCode.InvalidArgument,
      `${fn}: there is no CUDA device ${String(device)}; this process sees ${count} (indices 0..${count - 1})`,
    );
  }
}

export function cudaMemoryStats(device: number): CudaMemoryStats {
  checkCudaDevice(device, 'cuda.memoryStats');
  return slice().cudaMemoryStats(device);
}

export function resetCudaPeakMemoryStats(device: number): void {
  checkCudaDevice(device, 'cuda.resetPeakMemoryStats');
  slice().resetCudaPeakMemoryStats(device);
}

/** SMs that cuBLAS matmuls leave free for collectives running beside them (0: none). */
export function setCudaSMCarveout(sms: number): void {
  if (!Number.isInteger(sms) || sms < 0 || sms > 1024) {
    throw new DTorchError(ErrorCode.InvalidArgument, `cuda.setSMCarveout: expected a whole number of SMs in [0, 1024], got ${String(sms)}`);
  }
  slice().setCudaSMCarveout(sms);
}

/** Starts tracing the GPUs' work through LibTorch's profiler (Kineto, as torch.profiler). */
export function startKernelTrace(): void {
  slice().startKernelTrace();
}

/** Stops the trace and sums it up, with the `top` longest kernels. */
export function stopKernelTrace(top = 10): KernelTrace {
  if (!Number.isInteger(top) || top < 0) throw new DTorchError(ErrorCode.InvalidArgument, `cuda.stopKernelTrace: expected a non-negative integer for top, got ${String(top)}`);
  return slice().stopKernelTrace(top);
}

/** A short multi-line summary, as `dtorch info` prints it. */
export function describeRuntime(): string {
  const info = torchInfo();
  return [
    `LibTorch ${info.libtorchVersion}`,
    `CPU cores: ${info.cpuCores}`,
    `CUDA: ${info.builtWithCuda ? `${info.cudaDeviceCount} device(s)` : 'not built with CUDA'}`,
    ...(info.builtWithCuda ? [`NCCL: ${info.ncclVersion || 'not found (GPUs exchange data by peer copies)'}`] : []),
    ...info.cudaDevices.map(
      (d) => `  cuda:${d.index} ${d.name}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, compute capability ${d.computeCapability}`,
    ),
  ].join('\n');
}
