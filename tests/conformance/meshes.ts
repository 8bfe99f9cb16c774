// The meshes every conformance suite runs on: one CPU device, four CPU devices, and CUDA
// meshes of 1 and 2 GPUs when this process sees them (skipped, with the reason, otherwise).
import * as dt from '@dtorch/api';

export interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  skip: string | false;
}

const gpus = (() => {
  try {
    return dt.torchInfo().cudaDeviceCount;
  } catch {
    return 0;
  }
})();

export const meshCases: MeshCase[] = [
  { name: 'cpu x1', make: () => new dt.DeviceMesh('cpu', [0]), skip: false },
  { name: 'cpu x4', make: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3]), skip: false },
  { name: 'cuda x1', make: () => new dt.DeviceMesh('cuda', [0]), skip: gpus >= 1 ? false : 'no CUDA device in this process' },
  { name: 'cuda x2', make: () => new dt.DeviceMesh('cuda', [0, 1]), skip: gpus >= 2 ? false : `needs 2 CUDA devices, found ${gpus}` },
];
