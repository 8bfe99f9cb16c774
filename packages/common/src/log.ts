// Leveled logging for the TypeScript side, sharing DTORCH_LOG with the native engine.
import { config } from './env.js';

/** How much the library logs, from most to least: debug, info, warn (the default), error, or off. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'off';
const order: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, off: 4 };

function parseLevel(name: string): LogLevel {
  return name in order ? (name as LogLevel) : 'warn';
}

let threshold = order[parseLevel(config.logLevel)];

/**
 * Sets the TypeScript side's level, overriding DTORCH_LOG for this process; an unknown name
 * means warn. The native engine keeps the level it was given when it loaded.
 */
export function setLogLevel(level: LogLevel): void {
  threshold = order[parseLevel(level)];
}

/** Whether a message at `level` would be printed now: to skip building a costly debug message. */
export function logLevelEnabled(level: LogLevel): boolean {
  return order[level] >= threshold;
}

function emit(level: Exclude<LogLevel, 'off'>, message: string): void {
  if (order[level] < threshold) return;
  const line = `[dtorch ${level}] ${message}`;
  if (level === 'error' || level === 'warn') console.error(line);
  else console.log(line);
}

/**
 * The library's logger: each method prints `[dtorch <level>] message` when `level` is enabled,
 * warn and error to stderr, debug and info to stdout.
 */
export const log = {
  /** Detail for diagnosing the library itself (DTORCH_LOG=debug). */
  debug: (message: string) => emit('debug', message),
  /** Progress worth knowing about in a normal run (DTORCH_LOG=info). */
  info: (message: string) => emit('info', message),
  /** Something that works but probably not as meant: unused checkpoint weights, an option that has no effect. */
  warn: (message: string) => emit('warn', message),
  /** A failure the library reports instead of throwing, such as a background flush that failed. */
  error: (message: string) => emit('error', message),
};
