// Leveled logging for the TypeScript side, sharing DTORCH_LOG with the native engine.
import { config } from './env.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'off';
const order: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, off: 4 };

function parseLevel(name: string): LogLevel {
  return name in order ? (name as LogLevel) : 'warn';
}

let threshold = order[parseLevel(config.logLevel)];

export function setLogLevel(level: LogLevel): void {
  threshold = order[parseLevel(level)];
}

export function logLevelEnabled(level: LogLevel): boolean {
  return order[level] >= threshold;
}

function emit(level: Exclude<LogLevel, 'off'>, message: string): void {
  if (order[level] < threshold) return;
  const line = `[dtorch ${level}] ${message}`;
  if (level === 'error' || level === 'warn') console.error(line);
  else console.log(line);
}

export const log = {
  debug: (message: string) => emit('debug', message),
  info: (message: string) => emit('info', message),
  warn: (message: string) => emit('warn', message),
  error: (message: string) => emit('error', message),
};
