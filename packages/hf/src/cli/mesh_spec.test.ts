// --devices and --parallel to a mesh: the parsing, the product rule and the mesh's layout.
import { describe, expect, it } from 'vitest';
import { buildMesh, describeMesh, parseDevices, parseParallel, resolveMeshSpec } from './mesh_spec.js';
import { stepRate } from './progress.js';

describe('parseDevices', () => {
  it('takes a kind with indices, ranges, or the kind alone', () => {
    expect(parseDevices('cuda:0,1', 8)).toEqual({ kind: 'cuda', indices: [0, 1] });
    expect(parseDevices('cpu:0-3')).toEqual({ kind: 'cpu', indices: [0, 1, 2, 3] });
    expect(parseDevices('cuda:0,2-3', 8)).toEqual({ kind: 'cuda', indices: [0, 2, 3] });
    expect(parseDevices('cpu')).toEqual({ kind: 'cpu', indices: undefined });
  });

  it('refuses other kinds, bad indices, backward ranges and repeats', () => {
    expect(() => parseDevices('tpu:0')).toThrow('--devices: expected cpu or cuda');
    expect(() => parseDevices('cpu:a')).toThrow('--devices: expected a whole number but received "a"');
    expect(() => parseDevices('cpu:3-1')).toThrow('the range 3-1 runs backwards');
    expect(() => parseDevices('cpu:0,1,0')).toThrow('cpu:0 is named twice');
  });
});

describe('parseParallel', () => {
  it('keeps the order given (outermost first)', () => {
    expect(parseParallel('cfg=2,ulysses=2')).toEqual([{ name: 'cfg', degree: 2 }, { name: 'ulysses', degree: 2 }]);
    expect(parseParallel(undefined)).toEqual([]);
  });

  it('refuses unknown dims, repeats, bad degrees and malformed pairs', () => {
    expect(() => parseParallel('sp=2')).toThrow('unknown mesh dim "sp"; the pipelines act on dp, cfg, ulysses, ring, tp');
    expect(() => parseParallel('tp=2,tp=2')).toThrow('tp is given twice');
    expect(() => parseParallel('tp=0')).toThrow('a degree is at least 1');
    expect(() => parseParallel('tp=x')).toThrow('expected a whole number');
    expect(() => parseParallel('tp')).toThrow('expected name=degree pairs');
  });
});

describe('resolveMeshSpec', () => {
  it('takes the first devices when --devices gives none', () => {
    expect(resolveMeshSpec({ kind: 'cpu', indices: undefined }, parseParallel('ulysses=2')).indices).toEqual([0, 1]);
  });

  it('needs the product of the degrees to equal the device count', () => {
    expect(() => resolveMeshSpec(parseDevices('cpu:0,1'), parseParallel('cfg=2,ulysses=2'))).toThrow('--parallel cfg=2 x ulysses=2 needs 4 devices but --devices names 2 (cpu:0,1)');
    expect(() => resolveMeshSpec(parseDevices('cpu:0-3'), parseParallel('ulysses=2'))).toThrow('add dp=2 to --parallel');
    expect(() => resolveMeshSpec(parseDevices('cpu:0,1'), [])).toThrow('without --parallel the job uses 1; add dp=2');
    expect(() => resolveMeshSpec(parseDevices('cpu:0-2'), parseParallel('ulysses=2'))).toThrow("make the degrees' product 3");
  });
});

describe('buildMesh', () => {
  it('lays the devices out in the degrees, row-major, with the dims named', () => {
    const mesh = buildMesh(parseDevices('cpu:3,2,1,0'), parseParallel('cfg=2,ulysses=2'));
    expect(mesh.shape).toEqual([2, 2]);
    expect(mesh.dimNames).toEqual(['cfg', 'ulysses']);
    expect(mesh.devices).toEqual([3, 2, 1, 0]);
    expect(describeMesh(mesh)).toBe('cpu:3,2,1,0 (cfg=2 x ulysses=2)');
    expect(describeMesh(buildMesh(parseDevices('cpu:1'), []))).toBe('cpu:1');
  });
});

describe('stepRate', () => {
  it('counts from the end of the first step', () => {
    const first = { step: 1, steps: 5, timestep: 1000, elapsedMs: 1000 };
    expect(stepRate(first, first)).toEqual({ stepsPerSecond: undefined, secondsLeft: undefined });
    expect(stepRate(first, { step: 3, steps: 5, timestep: 500, elapsedMs: 2000 })).toEqual({ stepsPerSecond: 2, secondsLeft: 1 });
  });
});
