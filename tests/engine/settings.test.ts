// The engine's DTORCH_* settings (native/common/env.h): a value that cannot work is refused when
// read, naming the variable, the value and what it must be; it never quietly becomes the
// default. settingsFrom parses a given environment the way the engine parses its own.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { native } from '@dtorch/common';
import type { CoreSlice } from '@dtorch/core';
import { deviceFromEnv, seedFromEnv } from '../distributed/random.js';
import { runNode } from './run_node.js';

const slice = () => native()['core'] as CoreSlice;

const integers = {
  DTORCH_CPU_DEVICES: { key: 'cpuDevices', expected: 'integer from 1 to 1024', good: ['1', '64', '1024'], bad: ['0', '1025', '-1', '8x'] },
  DTORCH_INTRAOP_THREADS: {
    key: 'intraOpThreads',
    expected: 'integer from 1 to 1024 (unset: cores / CPU workers)',
    good: ['1', '16'],
    bad: ['0', '-2', '100000', 'auto'],
  },
  DTORCH_COLLECTIVE_TIMEOUT_MS: {
    key: 'collectiveTimeoutMs',
    expected: 'integer of milliseconds from 1 to 2147483647',
    good: ['1', '600000', '2147483647'],
    bad: ['0', '-5', '2147483648', '1e3', '10ms', ' 5', '99999999999999999999999'],
  },
  DTORCH_CUDA_BATCHES_IN_FLIGHT: { key: 'cudaBatchesInFlight', expected: 'integer from 0 to 1024', good: ['0', '4'], bad: ['-1', '4.5', '5000'] },
  DTORCH_GRAPH_COPY_LIMIT_MB: { key: 'graphCopyLimitMb', expected: 'integer of MiB from 0 to 65536', good: ['0', '16', '65536'], bad: ['-1', '1.5', '65537', '16MB'] },
  DTORCH_REPLAY_SEGMENT_NODES: { key: 'replaySegmentNodes', expected: 'integer from 1 to 1000000', good: ['1', '16384', '1000000'], bad: ['0', '-1', '1000001', '4k'] },
  DTORCH_REPLAY_HEAD_NODES: { key: 'replayHeadNodes', expected: 'integer from 0 (never) to 1000000', good: ['0', '64', '1000000'], bad: ['-1', '1000001', '64k'] },
} as const;

const flags = {
  DTORCH_NCCL: 'nccl',
  DTORCH_COPY_ENGINES: 'copyEngines',
  DTORCH_COPY_ENGINE_REDUCTIONS: 'copyEngineReductions',
  DTORCH_FUSION: 'fusion',
  DTORCH_GRAPHS: 'graphs',
  DTORCH_RMS_NORM_KERNEL: 'rmsNormKernel',
  DTORCH_SCALAR_OP_KERNEL: 'scalarOpKernel',
  DTORCH_ROTARY_KERNEL: 'rotaryKernel',
  DTORCH_LORA_JOIN: 'loraJoin',
  DTORCH_LORA_TALL: 'loraTall',
  DTORCH_MATMUL_TUNING: 'matmulTuning',
  DTORCH_CONV_CHANNELS_LAST: 'convChannelsLast',
} as const;

describe('native settings', () => {
  it('have their documented defaults when unset or empty', () => {
    const defaults = {
      cpuDevices: 64,
      intraOpThreads: 0,
      collectiveTimeoutMs: 600000,
      cudaBatchesInFlight: 4,
      graphCopyLimitMb: 16,
      replaySegmentNodes: 16384,
      replayHeadNodes: 64,
      nccl: true,
      copyEngines: true,
      copyEngineReductions: false,
      fusion: true,
      graphs: true,
      rmsNormKernel: true,
      scalarOpKernel: true,
      rotaryKernel: true,
      loraJoin: true,
      loraTall: true,
      matmulTuning: false,
      convChannelsLast: false,
    };
    expect(slice().settingsFrom({})).toEqual(defaults);
    const empty = Object.fromEntries([...Object.keys(integers), ...Object.keys(flags)].map((name) => [name, '']));
    expect(slice().settingsFrom(empty)).toEqual(defaults);
  });

  for (const [name, spec] of Object.entries(integers)) {
    it(`${name}: an integer in range is taken, anything else refused`, () => {
      for (const good of spec.good) expect(slice().settingsFrom({ [name]: good })[spec.key]).toBe(Number(good));
      for (const bad of spec.bad) {
        expect(() => slice().settingsFrom({ [name]: bad })).toThrow(
          `Expected ${spec.expected} for environment variable ${name} but received "${bad}" of type string`,
        );
      }
    });
  }

  for (const [name, key] of Object.entries(flags)) {
    it(`${name}: 0 or 1, nothing else`, () => {
      expect(slice().settingsFrom({ [name]: '1' })[key]).toBe(true);
      expect(slice().settingsFrom({ [name]: '0' })[key]).toBe(false);
      for (const bad of ['2', 'yes', 'true', 'off', '01']) {
        const error = (() => {
          try {
            slice().settingsFrom({ [name]: bad });
          } catch (e) {
            return e;
          }
        })();
        expect(error).toBeInstanceOf(dt.DTorchError);
        expect((error as dt.DTorchError).code).toBe('INVALID_ARGUMENT');
        expect((error as Error).message).toBe(`Expected 0 or 1 for environment variable ${name} but received "${bad}" of type string`);
      }
    });
  }

  it("are this process's own when valid", () => {
    expect(slice().settings()).toEqual(slice().settingsFrom(process.env as Record<string, string>));
  });

  it('a malformed one stops the first DTorch call of the process, which exits', () => {
    const script = `
      import * as dt from '@dtorch/api';
      try { new dt.DeviceMesh('cpu', [0, 1]); console.log('accepted'); }
      catch (e) { console.log('refused', e.code, e.message); }`;
    const r = runNode(script, { DTORCH_FUSION: 'yes' });
    expect(r.stdout).toContain('refused INVALID_ARGUMENT Expected 0 or 1 for environment variable DTORCH_FUSION but received "yes" of type string');
    expect(r.status).toBe(0);
  });
});

describe('test-suite settings', () => {
  it('DTORCH_PROPERTY_SEED: a whole number from 0 to 2^32-1, else refused (not a NaN seed)', () => {
    expect(seedFromEnv(undefined)).toBe(20261129);
    expect(seedFromEnv('7')).toBe(7);
    for (const bad of ['abc', '-1', '1.5', '4294967296']) expect(() => seedFromEnv(bad)).toThrow(`but received "${bad}"`);
  });

  it('DTORCH_PROPERTY_DEVICE: cpu or cuda, else refused (not silently run on CPUs)', () => {
    expect(deviceFromEnv(undefined)).toBe('cpu');
    expect(deviceFromEnv('cuda')).toBe('cuda');
    expect(() => deviceFromEnv('gpu')).toThrow('Expected cpu or cuda for environment variable DTORCH_PROPERTY_DEVICE but received "gpu"');
  });
});
