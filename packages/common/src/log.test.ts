import { afterEach, describe, expect, it, vi } from 'vitest';
import { log, logLevelEnabled, setLogLevel } from './log.js';
import { readConfig } from './env.js';

describe('logging', () => {
  afterEach(() => setLogLevel('warn'));

  it('prints what the level lets through, with the level named', () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    const out = vi.spyOn(console, 'log').mockImplementation(() => {});
    setLogLevel('warn');
    log.info('hidden');
    log.warn('shown');
    expect(out).not.toHaveBeenCalled();
    expect(err).toHaveBeenCalledWith('[dtorch warn] shown');
    setLogLevel('debug');
    expect(logLevelEnabled('debug')).toBe(true);
    log.debug('now shown');
    expect(out).toHaveBeenCalledWith('[dtorch debug] now shown');
    setLogLevel('off');
    log.error('silent');
    expect(err).toHaveBeenCalledTimes(1);
  });

  it('reads its settings from the environment', () => {
    const c = readConfig({ DTORCH_LOG: 'debug', DTORCH_CAPTURE_STACKS: '0', DTORCH_READ_TIMEOUT_MS: '50', DTORCH_SEGMENT_NODES: '' });
    expect(c).toMatchObject({ logLevel: 'debug', captureStacks: false, readTimeoutMs: 50, segmentNodes: 256 });
    expect(readConfig({ NODE_ENV: 'production' }).captureStacks).toBe(false);
    expect(readConfig({}).captureStacks).toBe(true);
  });
});
