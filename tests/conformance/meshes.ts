// The meshes every conformance suite runs on: CPU meshes of 1, 2, 3 and 2x2 devices, and CUDA
// meshes of 1 and 2 GPUs when this process sees them (skipped, with the reason, otherwise).
// tests/distributed runs the same ops under random placements on these shapes and more.
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
  { name: 'cpu x2', make: () => new dt.DeviceMesh('cpu', [0, 1]), skip: false },
  { name: 'cpu x3', make: () => new dt.DeviceMesh('cpu', [0, 1, 2]), skip: false },
  { name: 'cpu 2x2', make: () => dt.initDeviceMesh('cpu', [2, 2]), skip: false },
  { name: 'cuda x1', make: () => new dt.DeviceMesh('cuda', [0]), skip: gpus >= 1 ? false : 'no CUDA device in this process' },
  { name: 'cuda x2', make: () => new dt.DeviceMesh('cuda', [0, 1]), skip: gpus >= 2 ? false : `needs 2 CUDA devices, found ${gpus}` },
];
