// The client's DTORCH_* settings: a value that cannot work is refused when read (a DTorchError
// naming the variable, the value and what it must be), never quietly replaced by the default;
// a misspelt DTORCH_LOG only warns.
import { describe, expect, it, vi } from 'vitest';
import { readConfig } from './env.js';
import { DTorchError } from './errors.js';

const refusal = (env: Record<string, string>) => {
  try {
    readConfig(env, () => {});
  } catch (e) {
    return e;
  }
  return undefined;
};

describe('environment settings', () => {
  it('have their defaults when unset or empty', () => {
    const defaults = { logLevel: 'warn', nativePath: undefined, captureStacks: true, captureStacksOff: undefined, clusterToken: undefined, readTimeoutMs: 600_000, segmentNodes: 256, eventLoopSpinUs: 2000 };
    expect(readConfig({})).toEqual(defaults);
    const empty = { DTORCH_LOG: '', DTORCH_NATIVE_PATH: '', DTORCH_CAPTURE_STACKS: '', DTORCH_CLUSTER_TOKEN: '', DTORCH_READ_TIMEOUT_MS: '', DTORCH_SEGMENT_NODES: '', DTORCH_EVENT_LOOP_SPIN_US: '' };
    expect(readConfig(empty)).toEqual(defaults);
  });

  const integers = {
    DTORCH_SEGMENT_NODES: { key: 'segmentNodes', expected: 'integer from 1 to 1000000', good: ['1', '256', '1000000'], bad: ['0', '-1', '1000001', '1000000000000', '1e3', '2.5', 'x', ' 7'] },
    DTORCH_EVENT_LOOP_SPIN_US: { key: 'eventLoopSpinUs', expected: 'integer of microseconds from 0 to 1000000', good: ['0', '2000', '1000000'], bad: ['-1', '1000001', '2ms', '1.5'] },
    DTORCH_READ_TIMEOUT_MS: {
      key: 'readTimeoutMs',
      expected: 'integer of milliseconds from 1 to 2147483647',
      good: ['1', '600000', '2147483647'],
      bad: ['0', '-100', '2147483648', '10s', 'Infinity', '0x10'],
    },
  } as const;

  for (const [name, spec] of Object.entries(integers)) {
    it(`${name}: an integer in range is taken, anything else refused`, () => {
      for (const good of spec.good) expect(readConfig({ [name]: good })[spec.key]).toBe(Number(good));
      for (const bad of spec.bad) {
        const e = refusal({ [name]: bad });
        expect(e).toBeInstanceOf(DTorchError);
        expect((e as DTorchError).code).toBe('INVALID_ARGUMENT');
        expect((e as Error).message).toBe(`Expected ${spec.expected} for environment variable ${name} but received "${bad}" of type string`);
      }
    });
  }

  it('DTORCH_CAPTURE_STACKS: 1 and 0 are taken (else the NODE_ENV default), a value it does not know refused', () => {
    expect(readConfig({ DTORCH_CAPTURE_STACKS: '1', NODE_ENV: 'production' }).captureStacks).toBe(true);
    expect(readConfig({ DTORCH_CAPTURE_STACKS: '0' }).captureStacks).toBe(false);
    expect(readConfig({ NODE_ENV: 'production' }).captureStacks).toBe(false);
    for (const bad of ['yes', 'false', '2', 'on']) {
      // 'false' used to turn capture on (anything but '0' did)
      const e = refusal({ DTORCH_CAPTURE_STACKS: bad });
      expect(e).toBeInstanceOf(DTorchError);
      expect((e as Error).message).toMatch(new RegExp(`^Expected 0(,| or) 1.* for environment variable DTORCH_CAPTURE_STACKS but received "${bad}" of type string$`));
    }
  });

  it('DTORCH_LOG: a level is taken; a misspelt one warns, naming it, and logs at warn', () => {
    for (const level of ['debug', 'info', 'warn', 'error', 'off']) expect(readConfig({ DTORCH_LOG: level }).logLevel).toBe(level);
    const warn = vi.fn();
    expect(readConfig({ DTORCH_LOG: 'verbose' }, warn).logLevel).toBe('warn');
    expect(warn).toHaveBeenCalledWith(
      'Expected one of debug, info, warn, error, off for environment variable DTORCH_LOG but received "verbose" of type string; logging at warn',
    );
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    readConfig({ DTORCH_LOG: 'DEBUG' }); // by default the warning goes to stderr
    expect(err).toHaveBeenCalledWith(expect.stringMatching(/^\[dtorch warn\] Expected one of .* but received "DEBUG"/));
    err.mockRestore();
  });

  it('DTORCH_NATIVE_PATH: any path (the loader says why one does not load)', () => {
    expect(readConfig({ DTORCH_NATIVE_PATH: '/opt/dtorch.node' }).nativePath).toBe('/opt/dtorch.node');
  });
});
