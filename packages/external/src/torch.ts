// Facts about the LibTorch the addon runs on and the devices it sees.
import { readFileSync } from 'node:fs';
import { DTorchError, ErrorCode, native } from '@dtorch/common';

/** DTorch's version (the packages are versioned together by changesets), e.g. "0.1.0". */
export const dtorchVersion: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

interface ExternalSlice {
  torchInfo(): TorchInfo;
  cudaMemoryStats(device: number): CudaMemoryStats;
  cudaMatmulTuningStats(): CudaMatmulTuningStats;
  resetCudaPeakMemoryStats(device: number): void;
  setCudaSMCarveout(sms: number): void;
  startKernelTrace(): void;
  stopKernelTrace(top: number, gaps: number): KernelTrace;
}

/** The LibTorch build the addon runs on and the devices it sees, as `dtorch info` prints them. */
export interface TorchInfo {
  /** LibTorch version the addon was built against, e.g. "2.13.0". */
  libtorchVersion: string;
  /** Whether this LibTorch was built with CUDA (`torch.backends.cuda.is_built()`); false for a CPU-only build. */
  builtWithCuda: boolean;
  /** GPUs this process sees (`torch.cuda.device_count()`, after CUDA_VISIBLE_DEVICES); 0 without CUDA. */
  cudaDeviceCount: number;
  /** Hardware threads of the machine (std::thread::hardware_concurrency, at least 1). */
  cpuCores: number;
  /** at::get_parallel_info(): OpenMP/MKL thread settings. */
  parallelInfo: string;
  /** Each visible GPU, by index; empty without CUDA. */
  cudaDevices: CudaDevice[];
  /** Version of the NCCL the addon is linked with (the one LibTorch loads); '' without NCCL. */
  ncclVersion: string;
}

/** The CUDA caching allocator's counters for one GPU (torch.cuda.memory_allocated and friends). */
export interface CudaMemoryStats {
  /** Bytes held by live tensors now (torch.cuda.memory_allocated). */
  allocatedBytes: number;
  /** Highest allocatedBytes since the last reset (torch.cuda.max_memory_allocated). */
  peakAllocatedBytes: number;
  /** Bytes the caching allocator holds from CUDA, in use or cached for reuse (torch.cuda.memory_reserved). */
  reservedBytes: number;
}

/** What a GPU did between startKernelTrace() and stopKernelTrace(), per device. */
export interface KernelTrace {
  /** One summary per GPU that ran work while tracing. */
  devices: {
    /** The CUDA device index. */
    device: number;
    /** Kernels, copies and fills that ran. */
    events: number;
    /** Time the device ran any of them (the union of their intervals). */
    busyMs: number;
    /** From the start of the first to the end of the last. */
    spanMs: number;
    /**
     * The idle time within the span, by the length of the gap it lies in: short (under 20 µs:
     * kernels issued more slowly than they ran), medium (20 to 200 µs) and long (200 µs and
     * more: the device waited for the program).
     */
    idleByGap: {
      /** Milliseconds idle in gaps under 20 µs. */
      shortMs: number;
      /** Milliseconds idle in gaps of 20 to 200 µs. */
      mediumMs: number;
      /** Milliseconds idle in gaps of 200 µs and more. */
      longMs: number;
    };
    /** The longest idle gaps, longest first. */
    longestGaps: {
      /** How long the gap lasted, in milliseconds. */
      ms: number;
      /** When it began, in milliseconds from the start of the device's first work. */
      atMs: number;
      /** The kernel (copy, fill) whose end began it. */
      before: string;
      /** The one whose start ended it. */
      after: string;
    }[];
  }[];
  /** The kernels that took longest (all devices), with their calls and total time. */
  top: {
    /** The kernel's name, as the profiler reports it (often a mangled C++ name). */
    name: string;
    /** How many times it ran. */
    calls: number;
    /** Milliseconds it ran, summed over its calls and devices. */
    totalMs: number;
  }[];
}

/** One GPU, as `torch.cuda.get_device_properties` describes it. */
export interface CudaDevice {
  /** The CUDA device index, as in `cuda:0`. */
  index: number;
  /** The product name, e.g. "NVIDIA H200". */
  name: string;
  /** Bytes. */
  totalMemory: number;
  /** `major.minor`, e.g. "9.0" for Hopper. */
  computeCapability: string;
}

function slice(): ExternalSlice {
  return native()['external'] as ExternalSlice;
}

/** The LibTorch version, CUDA, NCCL and thread settings and the GPUs this process sees. */
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

/**
 * The caching allocator's counters for GPU `device` (as `torch.cuda.memory_stats`); throws
 * INVALID_ARGUMENT for an index this process does not see.
 */
export function cudaMemoryStats(device: number): CudaMemoryStats {
  checkCudaDevice(device, 'cuda.memoryStats');
  return slice().cudaMemoryStats(device);
}

/**
 * Starts {@link CudaMemoryStats.peakAllocatedBytes} of GPU `device` again from what is allocated now
 * (`torch.cuda.reset_peak_memory_stats`), to measure the peak of one stretch of work.
 */
export function resetCudaPeakMemoryStats(device: number): void {
  checkCudaDevice(device, 'cuda.resetPeakMemoryStats');
  slice().resetCudaPeakMemoryStats(device);
}

/**
 * What the timed matmuls did in this process, all GPUs together (DTORCH_MATMUL_TUNING; all zero
 * without CUDA or with it off): a linear's first call of a shape times cuBLASLt's candidates.
 */
export interface CudaMatmulTuningStats {
  /** Shapes a kernel was chosen for (by timing, or the one candidate). */
  shapes: number;
  /** Candidates timed for them. */
  candidates: number;
  /** Calls that ran the kernel chosen for their shape (the choosing call included). */
  tunedCalls: number;
  /** Calls that ran the heuristic's first kernel untimed: a shape first seen while its stream captured a CUDA graph. */
  heuristicCalls: number;
}

/** The timed matmuls' counters of this process. */
export function cudaMatmulTuningStats(): CudaMatmulTuningStats {
  return slice().cudaMatmulTuningStats();
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

/** Throws INVALID_ARGUMENT, naming `caller`, unless `top` and `gaps` are counts stopKernelTrace takes. */
export function checkKernelTraceCounts(caller: string, top: number, gaps: number): void {
  for (const [name, n] of [['top', top], ['gaps', gaps]] as const) {
    if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) throw new DTorchError(ErrorCode.InvalidArgument, `${caller}: expected a non-negative integer for ${name}, got ${String(n)}`);
  }
}

/** Stops the trace and sums it up, with the `top` longest kernels and each device's `gaps` longest idle gaps. */
export function stopKernelTrace(top = 10, gaps = 8): KernelTrace {
  checkKernelTraceCounts('cuda.stopKernelTrace', top, gaps);
  return slice().stopKernelTrace(top, gaps);
}

/** A short multi-line summary, as `dtorch info` prints it. */
export function describeRuntime(): string {
  const info = torchInfo();
  return [
    `DTorch ${dtorchVersion} on LibTorch ${info.libtorchVersion}`,
    `CPU cores: ${info.cpuCores}`,
    `CUDA: ${info.builtWithCuda ? `${info.cudaDeviceCount} device(s)` : 'not built with CUDA'}`,
    ...(info.builtWithCuda ? [`NCCL: ${info.ncclVersion || 'not found (GPUs exchange data by peer copies)'}`] : []),
    ...info.cudaDevices.map(
      (d) => `  cuda:${d.index} ${d.name}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, compute capability ${d.computeCapability}`,
    ),
  ].join('\n');
}
