// The mesh of `dtorch generate` from its flags: --devices names the devices (cuda:0,1 | cpu:0-3 |
// cpu), --parallel the mesh dims and their degrees (cfg=2,ulysses=2), outermost first. The
// degrees' product must equal the device count: a leftover factor is an error that names the
// `dp=` that would use it, never a dim added behind the user's back. Without --devices the first
// GPUs are taken (the first CPU devices when there is none), as many as the degrees need.
import * as dt from '@dtorch/api';
import { invalid } from './invalid_flag.js';

/** The mesh dims the pipelines act on. */
export const parallelDims = ['dp', 'cfg', 'ulysses', 'ring', 'tp'] as const;
/** One of parallelDims. */
export type ParallelDim = (typeof parallelDims)[number];

/** --devices parsed. */
export interface DeviceSpec {
  /** The device type. */
  kind: 'cpu' | 'cuda';
  /** Device indices, in mesh order; undefined: "the first ones" (`--devices cpu`). */
  indices: number[] | undefined;
}

/** One `name=degree` of --parallel: a mesh dim. */
export interface ParallelSpec {
  /** The dim's name. */
  name: ParallelDim;
  /** The dim's size, at least 1. */
  degree: number;
}

function wholeNumber(text: string, what: string): number {
  if (!/^\d+$/.test(text)) throw invalid(`${what}: expected a whole number but received ${JSON.stringify(text)}`);
  return Number(text);
}

/** How many devices of `kind` this process has: its CPU devices (DTORCH_CPU_DEVICES), its GPUs. */
export function deviceCount(kind: 'cpu' | 'cuda'): number {
  return kind === 'cpu' ? dt.nativeSettings().cpuDevices : dt.cuda.deviceCount();
}

/**
 * `cuda:0,1`, `cpu:0-3`, `cuda:0,2-3`, `cpu` (the first ones). Each index is checked against the
 * `available` devices of its kind (default: this process's) before a range is expanded, so
 * `cpu:0-300000000` is an error, not 300 million indices.
 */
export function parseDevices(text: string, available?: number): DeviceSpec {
  const match = /^(cpu|cuda)(?::(.+))?$/.exec(text.trim());
  if (!match) {
    throw invalid(`--devices: expected cpu or cuda, optionally with indices (cuda:0,1 or cpu:0-3), but received ${JSON.stringify(text)}`);
  }
  const kind = match[1] as 'cpu' | 'cuda';
  if (match[2] === undefined) return { kind, indices: undefined };
  const count = available ?? deviceCount(kind);
  const exists = (index: number) => {
    if (index < count) return index;
    const there = kind === 'cpu' ? `this process has cpu devices 0..${count - 1} (set DTORCH_CPU_DEVICES for more)` : count === 0 ? 'this process sees no CUDA device; use cpu' : `this process sees cuda devices 0..${count - 1}`;
    throw invalid(`--devices: ${kind} device ${index} does not exist: ${there}`);
  };
  const indices: number[] = [];
  for (const part of match[2].split(',')) {
    const range = /^(\d+)-(\d+)$/.exec(part.trim());
    if (range) {
      const [first, last] = [wholeNumber(range[1]!, '--devices'), wholeNumber(range[2]!, '--devices')];
      if (last < first) throw invalid(`--devices: the range ${part} runs backwards; write ${last}-${first}`);
      exists(last);
      for (let i = first; i <= last; i++) indices.push(i);
    } else {
      indices.push(exists(wholeNumber(part.trim(), '--devices')));
    }
  }
  const seen = new Set<number>();
  for (const d of indices) {
    if (seen.has(d)) throw invalid(`--devices: ${kind}:${d} is named twice; each device holds one rank`);
    seen.add(d);
  }
  return { kind, indices };
}

/** `cfg=2,ulysses=2`: mesh dims outermost first; '' or absent: a 1-device job. */
export function parseParallel(text: string | undefined): ParallelSpec[] {
  if (text === undefined || text.trim() === '') return [];
  const dims: ParallelSpec[] = [];
  for (const part of text.split(',')) {
    const match = /^\s*([a-z]+)\s*=\s*(\S+)\s*$/.exec(part);
    if (!match) throw invalid(`--parallel: expected name=degree pairs separated by commas (cfg=2,ulysses=2) but received ${JSON.stringify(part)}`);
    const name = match[1]!;
    if (!(parallelDims as readonly string[]).includes(name)) {
      throw invalid(`--parallel: unknown mesh dim ${JSON.stringify(name)}; the pipelines act on ${parallelDims.join(', ')}`);
    }
    const degree = wholeNumber(match[2]!, `--parallel ${name}`);
    if (degree < 1) throw invalid(`--parallel: ${name}=${degree}; a degree is at least 1`);
    if (dims.some((d) => d.name === name)) throw invalid(`--parallel: ${name} is given twice`);
    dims.push({ name: name as ParallelDim, degree });
  }
  return dims;
}

function defaultKind(): 'cpu' | 'cuda' {
  return dt.cuda.isAvailable() ? 'cuda' : 'cpu';
}

/**
 * The devices and the mesh shape the flags ask for, checked against each other (not yet against
 * the machine: the DeviceMesh does that, naming the devices there are).
 */
export function resolveMeshSpec(devices: DeviceSpec | undefined, parallel: readonly ParallelSpec[]): { kind: 'cpu' | 'cuda'; indices: number[]; dims: ParallelSpec[] } {
  const needed = parallel.reduce((n, d) => n * d.degree, 1);
  const kind = devices?.kind ?? defaultKind();
  const indices = devices?.indices ?? Array.from({ length: needed }, (_, i) => i);
  const degrees = parallel.map((d) => `${d.name}=${d.degree}`).join(' x ');
  const devicesText = (n: number) => `${n} device${n === 1 ? '' : 's'}`;
  if (needed > indices.length) {
    throw invalid(`--parallel ${degrees} needs ${devicesText(needed)} but --devices names ${indices.length} (${kind}:${indices.join(',')}); name ${needed} devices or lower the degrees`);
  }
  if (needed < indices.length) {
    const leftover = indices.length / needed;
    const uses = parallel.length === 0 ? 'without --parallel the job uses 1' : `--parallel ${degrees} uses ${needed}`;
    const remedy = Number.isInteger(leftover) && !parallel.some((d) => d.name === 'dp')
      ? `add dp=${leftover} to --parallel to split the images over them, or name ${devicesText(needed)}`
      : `name ${devicesText(needed)} or make the degrees' product ${indices.length}`;
    throw invalid(`--devices names ${devicesText(indices.length)} but ${uses}; ${remedy}`);
  }
  return { kind, indices, dims: [...parallel] };
}

/** The DeviceMesh of the flags: shape = the degrees, dim names = their names (a 1-device mesh without --parallel). */
export function buildMesh(devices: DeviceSpec | undefined, parallel: readonly ParallelSpec[]): dt.DeviceMesh {
  const { kind, indices, dims } = resolveMeshSpec(devices, parallel);
  if (dims.length === 0) return new dt.DeviceMesh(kind, indices);
  let next = 0;
  type Nested = number | Nested[];
  const nest = (dim: number): Nested => (dim === dims.length ? indices[next++]! : Array.from({ length: dims[dim]!.degree }, () => nest(dim + 1)));
  return new dt.DeviceMesh(kind, nest(0), dims.map((d) => d.name));
}

/** `cpu:0,1 (ulysses=2)`, for the run's first line. */
export function describeMesh(mesh: dt.DeviceMesh): string {
  const devices = `${mesh.deviceType}:${mesh.devices.join(',')}`;
  if (!mesh.dimNames) return devices;
  return `${devices} (${mesh.dimNames.map((n, i) => `${n}=${mesh.shape[i]}`).join(' x ')})`;
}
