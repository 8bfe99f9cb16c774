// Environment configuration, read once. Every variable the library reads is listed here (the
// engine's own in native/common/env.h). A value that cannot work is refused when read, with a
// DTorchError naming the variable, the value and what it must be; it never quietly becomes the
// default. Only a misspelt DTORCH_LOG is let through, with a warning: logging must not stop a
// program.
import { invalidParameter } from './check.js';
import type { DTorchError } from './errors.js';

export const logLevels = ['debug', 'info', 'warn', 'error', 'off'] as const;
export type LogLevelName = (typeof logLevels)[number];

/**
 * The library's settings from the environment, each field named after the variable it comes from.
 * Read once at load into {@link config}; {@link readConfig} reads another environment.
 */
export interface DTorchConfig {
  /** DTORCH_LOG: debug | info | warn | error | off (default warn). */
  logLevel: LogLevelName;
  /** DTORCH_NATIVE_PATH: an explicit path to dtorch.node, tried first by the loader (which opens only a `.node` file). */
  nativePath: string | undefined;
  /**
   * DTORCH_CAPTURE_STACKS: call-site capture for kernel errors: 1 on, within a time budget (default
   * unless NODE_ENV=production), all for every op, 0 off.
   */
  captureStacks: boolean | 'all';
  /** What turned call-site capture off ('DTORCH_CAPTURE_STACKS=0' or 'NODE_ENV=production'); undefined while on. */
  captureStacksOff: string | undefined;
  /** DTORCH_CLUSTER_TOKEN: the cluster's token, dt.cluster.start's and a worker's default (never printed). */
  clusterToken: string | undefined;
  /** DTORCH_READ_TIMEOUT_MS: how long dataSync() waits before it throws TIMEOUT (1 to 2^31-1, default 600000). */
  readTimeoutMs: number;
  /** DTORCH_SEGMENT_NODES: recorded nodes per segment before it is flushed (1 to 1,000,000, default 256). */
  segmentNodes: number;
  /**
   * DTORCH_EVENT_LOOP_SPIN_US: how long an awaited sync or read keeps the event loop turning, so that
   * its answer is seen at once (0 to 1,000,000 microseconds, default 2000; 0 never spins).
   */
  eventLoopSpinUs: number;
}

/** The largest DTORCH_SEGMENT_NODES (the engine's Recorder::kMaxFlushThreshold). */
export const maxSegmentNodes = 1_000_000;
// setTimeout's bound, and more than any wait needs (24.8 days)
const maxMs = 2 ** 31 - 1;

/** Environment variables by name, as `process.env` holds them; {@link readConfig} takes one so that tests can pass their own. */
export type Env = Readonly<Record<string, string | undefined>>;

function refused(name: string, expected: string, raw: string): DTorchError {
  return invalidParameter(`environment variable ${name}`, expected, raw);
}

// Unset or empty: the default. Decimal digits only: "1e3", "0x10", " 5" and "5ms" are refused.
function integer(env: Env, name: string, min: number, max: number, fallback: number, expected = `integer from ${min} to ${max}`): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) throw refused(name, expected, raw);
  return n;
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== '0' && raw !== '1') throw refused(name, '0 or 1', raw);
  return raw === '1';
}

// 1 keeps capture within a time budget, all captures every op (packages/core/src/call_sites.ts);
// on while developing, off under NODE_ENV=production unless asked for
function captureStacks(env: Env): boolean | 'all' {
  const raw = env['DTORCH_CAPTURE_STACKS'];
  if (raw === 'all') return 'all';
  if (raw !== undefined && raw !== '' && raw !== '0' && raw !== '1') throw refused('DTORCH_CAPTURE_STACKS', '0, 1 or all', raw);
  return flag(env, 'DTORCH_CAPTURE_STACKS', env['NODE_ENV'] !== 'production');
}

function logLevel(env: Env, warn: (message: string) => void): LogLevelName {
  const raw = env['DTORCH_LOG'];
  if (raw === undefined || raw === '') return 'warn';
  if ((logLevels as readonly string[]).includes(raw)) return raw as LogLevelName;
  warn(`${refused('DTORCH_LOG', `one of ${logLevels.join(', ')}`, raw).message}; logging at warn`);
  return 'warn';
}

/**
 * The configuration `env` gives; throws INVALID_ARGUMENT for a value that cannot work, and
 * reports a misspelt DTORCH_LOG through `warn`.
 */
export function readConfig(env: Env = process.env, warn = (message: string) => console.error(`[dtorch warn] ${message}`)): DTorchConfig {
  const capture = captureStacks(env);
  return {
    logLevel: logLevel(env, warn),
    nativePath: env['DTORCH_NATIVE_PATH'] || undefined,
    captureStacks: capture,
    captureStacksOff: capture !== false ? undefined : env['DTORCH_CAPTURE_STACKS'] === '0' ? 'DTORCH_CAPTURE_STACKS=0' : 'NODE_ENV=production',
    clusterToken: env['DTORCH_CLUSTER_TOKEN'] || undefined,
    readTimeoutMs: integer(env, 'DTORCH_READ_TIMEOUT_MS', 1, maxMs, 600_000, `integer of milliseconds from 1 to ${maxMs}`),
    segmentNodes: integer(env, 'DTORCH_SEGMENT_NODES', 1, maxSegmentNodes, 256),
    eventLoopSpinUs: integer(env, 'DTORCH_EVENT_LOOP_SPIN_US', 0, 1_000_000, 2000, 'integer of microseconds from 0 to 1000000'),
  };
}

/** The settings of this process, read from `process.env` once when the package loads. */
export const config: DTorchConfig = readConfig();
