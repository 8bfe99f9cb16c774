// The meshes every conformance suite runs on: CPU meshes of 1, 2, 3 and 2x2 devices, and CUDA
// meshes of 1 and 2 GPUs when this process sees them (skipped otherwise, the reason in the
// case's name). tests/distributed runs the same ops under random placements on these shapes and more.
//
// On a machine with NVIDIA GPUs, seen without the addon (/dev/nvidia<N>, nvidia-smi -L, or
// DTORCH_EXPECT_CUDA=1; the device harness sets DTORCH_EXPECT_NCCL=1 when its torch has CUDA),
// a CUDA case the addon cannot run fails instead of skipping: a broken or CPU-only build there
// must not pass as "no CUDA". DTORCH_EXPECT_CUDA=0 says the GPUs are not for these tests.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import * as dt from '@dtorch/api';

export interface MeshCase {
  /** The mesh, with the reason when skipped: 'cuda x2 (skipped: needs 2 CUDA devices, found 0)'. */
  name: string;
  devices: number;
  make: () => dt.DeviceMesh;
  skip: string | false;
}

/** NVIDIA GPUs this machine gives this process, counted without the addon, and how they were counted. */
export const [machineGpus, machineGpuSource]: [number, 'nvidia-smi' | '/dev' | 'env' | 'none'] = (() => {
  const expect = process.env['DTORCH_EXPECT_CUDA'];
  if (expect === '0') return [0, 'none'];
  let count = 0;
  let source: 'nvidia-smi' | '/dev' | 'env' | 'none' = 'none';
  try {
    count = readdirSync('/dev').filter((n) => /^nvidia\d+$/.test(n)).length;
    if (count > 0) source = '/dev';
  } catch {
    count = 0; // no /dev: not Linux, no NVIDIA device files
  }
  if (count > 0) {
    const listed = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 10_000 });
    if (listed.status === 0) [count, source] = [listed.stdout.split('\n').filter((l) => l.startsWith('GPU ')).length, 'nvidia-smi'];
  }
  // the device harness says its torch has CUDA; the number is not known then, only that there is one
  if (count === 0 && (expect === '1' || process.env['DTORCH_EXPECT_NCCL'] === '1')) [count, source] = [1, 'env'];
  const visible = process.env['CUDA_VISIBLE_DEVICES'];
  if (visible !== undefined) count = Math.min(count, visible.trim() === '' ? 0 : visible.split(',').length);
  return [count, source];
})();

// No try/catch: an addon that cannot say what it sees fails every file that asks, not "no CUDA".
const info = dt.torchInfo();
export const processGpus = info.cudaDeviceCount;

/**
 * Why a case that needs `needed` GPUs is skipped here, or false when it runs. On a machine with
 * that many GPUs it always runs (and fails in cudaMesh if the addon does not see them).
 */
export function cudaSkip(needed: number): string | false {
  if (processGpus >= needed || machineGpus >= needed) return false;
  if (processGpus === 0) return info.builtWithCuda ? 'no CUDA device in this process' : 'no CUDA: the addon is built without it and this machine has no NVIDIA GPU';
  return `needs ${needed} CUDA devices, found ${processGpus}`;
}

/** `(skipped: why)` for a test title, or '' when it runs. */
export const skipNote = (skip: string | false): string => (skip ? ` (skipped: ${skip})` : '');

/** A CUDA mesh of devices 0..n-1; throws, naming the build, when the machine has them and the addon does not. */
export function cudaMesh(n: number, dimNames?: string[]): dt.DeviceMesh {
  if (processGpus < n) {
    throw new Error(
      `this machine has ${machineGpus} NVIDIA GPU(s) but the addon sees ${processGpus} CUDA device(s) (built with CUDA: ${info.builtWithCuda}): ` +
        'a broken or CPU-only build; rebuild it against a CUDA LibTorch (npm run build:native), or set DTORCH_EXPECT_CUDA=0 to skip the CUDA cases',
    );
  }
  return new dt.DeviceMesh('cuda', Array.from({ length: n }, (_, i) => i), dimNames);
}

const cuda = (n: number, name: string): MeshCase => {
  const skip = cudaSkip(n);
  return { name: `${name}${skipNote(skip)}`, devices: n, make: () => cudaMesh(n), skip };
};

export const meshCases: MeshCase[] = [
  { name: 'cpu x1', devices: 1, make: () => new dt.DeviceMesh('cpu', [0]), skip: false },
  { name: 'cpu x2', devices: 2, make: () => new dt.DeviceMesh('cpu', [0, 1]), skip: false },
  { name: 'cpu x3', devices: 3, make: () => new dt.DeviceMesh('cpu', [0, 1, 2]), skip: false },
  { name: 'cpu 2x2', devices: 4, make: () => dt.initDeviceMesh('cpu', [2, 2]), skip: false },
  cuda(1, 'cuda x1'),
  cuda(2, 'cuda x2'),
];
