// Facts about the LibTorch the addon runs on and the devices it sees.
import { native } from '@dtorch/common';

interface ExternalSlice {
  torchInfo(): TorchInfo;
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

/** A short multi-line summary, as `dtorch info` prints it. */
export function describeRuntime(): string {
  const info = torchInfo();
  return [
    `LibTorch ${info.libtorchVersion}`,
    `CPU cores: ${info.cpuCores}`,
    `CUDA: ${info.builtWithCuda ? `${info.cudaDeviceCount} device(s)` : 'not built with CUDA'}`,
    ...info.cudaDevices.map(
      (d) => `  cuda:${d.index} ${d.name}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, compute capability ${d.computeCapability}`,
    ),
  ].join('\n');
}
