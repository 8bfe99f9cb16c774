// dt.cuda: what this process can use of CUDA, as torch.cuda reports it.
import { torchInfo, type CudaDevice } from '@dtorch/external';

/** Whether the addon was built with CUDA and at least one GPU is visible. */
export function isAvailable(): boolean {
  return torchInfo().cudaDeviceCount > 0;
}

export function deviceCount(): number {
  return torchInfo().cudaDeviceCount;
}

/** Name, memory and compute capability of each visible GPU. */
export function devices(): CudaDevice[] {
  return torchInfo().cudaDevices;
}
