// Seeded generators for the property suites (mulberry32): a failing case prints its seed and
// index, and DTORCH_PROPERTY_SEED=<seed> replays the run.
import * as dt from '@dtorch/api';

export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A seed that is not a whole number from 0 to 2^32-1 is refused, not run as NaN (mulberry32 of 0).
export function seedFromEnv(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 20261129;
  if (!/^\d+$/.test(raw) || Number(raw) > 2 ** 32 - 1) {
    throw new Error(`Expected integer from 0 to 4294967295 for environment variable DTORCH_PROPERTY_SEED but received "${raw}" of type string`);
  }
  return Number(raw);
}

export const propertySeed = seedFromEnv(process.env['DTORCH_PROPERTY_SEED']);

export class Gen {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = rng(seed);
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** Sizes 0..maxSize: often smaller than the mesh and not divisible by it. */
  shape(minNdim: number, maxNdim: number, maxSize = 7): number[] {
    return Array.from({ length: this.int(minNdim, maxNdim) }, () => this.int(this.chance(0.1) ? 0 : 1, maxSize));
  }
  /** Integer-valued floats: sums and averages of them are exact. */
  values(n: number): number[] {
    return Array.from({ length: n }, () => this.int(-20, 20));
  }
  placement(ndim: number, partials: readonly dt.ReduceOp[] = ['sum', 'avg', 'max', 'min']): dt.Placement {
    const r = this.next();
    if (r < 0.35 || (ndim === 0 && r < 0.8)) return dt.Replicate();
    if (r < 0.8 && ndim > 0) return dt.Shard(this.int(0, ndim - 1));
    return partials.length ? dt.Partial(this.pick(partials)) : dt.Replicate();
  }
  placements(mesh: dt.DeviceMesh, ndim: number, partials?: readonly dt.ReduceOp[]): dt.Placement[] {
    return mesh.shape.map(() => this.placement(ndim, partials));
  }
}

/** DTORCH_PROPERTY_DEVICE: cpu (unset) or cuda; a misspelt device is refused, not run on CPUs. */
export function deviceFromEnv(raw: string | undefined): 'cpu' | 'cuda' {
  if (raw === undefined || raw === '' || raw === 'cpu') return 'cpu';
  if (raw === 'cuda') return 'cuda';
  throw new Error(`Expected cpu or cuda for environment variable DTORCH_PROPERTY_DEVICE but received "${raw}" of type string`);
}

/**
 * The meshes of the property suites: CPU meshes of 1, 2, 3, 4, 2x2, 2x3 and 2x4 devices; with
 * DTORCH_PROPERTY_DEVICE=cuda (the GPU machine), CUDA meshes of the GPUs present (1, 2, 2x1 and
 * the reversed order when there are two; 4, 2x2 (dp x tp) with four; 8, 2x4, 4x2 with eight).
 */
export function propertyMeshes(): dt.DeviceMesh[] {
  if (deviceFromEnv(process.env['DTORCH_PROPERTY_DEVICE']) === 'cuda') {
    const gpus = dt.torchInfo().cudaDeviceCount;
    if (gpus < 1) throw new Error('DTORCH_PROPERTY_DEVICE=cuda but this process sees no CUDA device');
    const meshes = [new dt.DeviceMesh('cuda', [0])];
    if (gpus >= 2) meshes.push(new dt.DeviceMesh('cuda', [0, 1]), new dt.DeviceMesh('cuda', [1, 0]), dt.initDeviceMesh('cuda', [2, 1]));
    if (gpus >= 4) meshes.push(new dt.DeviceMesh('cuda', [0, 1, 2, 3]), dt.initDeviceMesh('cuda', [2, 2], ['dp', 'tp']));
    if (gpus >= 8) meshes.push(new dt.DeviceMesh('cuda', [0, 1, 2, 3, 4, 5, 6, 7]), dt.initDeviceMesh('cuda', [2, 4], ['ulysses', 'ring']), dt.initDeviceMesh('cuda', [4, 2], ['dp', 'tp']));
    return meshes;
  }
  return [
    new dt.DeviceMesh('cpu', [0]),
    new dt.DeviceMesh('cpu', [0, 1]),
    new dt.DeviceMesh('cpu', [0, 1, 2]),
    new dt.DeviceMesh('cpu', [0, 1, 2, 3]),
    dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']),
    dt.initDeviceMesh('cpu', [2, 3], ['a', 'b']),
    dt.initDeviceMesh('cpu', [2, 4], ['dp', 'tp']),
  ];
}

export const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
export const describeCase = (seed: number, index: number, what: string) => `seed ${seed}, case ${index}: ${what}`;
