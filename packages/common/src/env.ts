// Environment configuration, read once. Every variable the library reads is listed here.

export interface DTorchConfig {
  /** DTORCH_LOG: debug | info | warn | error | off (default warn). */
  logLevel: string;
  /** DTORCH_NATIVE_PATH: an explicit path to dtorch.node, tried first by the loader. */
  nativePath: string | undefined;
  /** DTORCH_CAPTURE_STACKS: 1/0 turns call-site capture for kernel errors on/off (default: on unless NODE_ENV=production). */
  captureStacks: boolean;
  /** DTORCH_READ_TIMEOUT_MS: how long dataSync() waits before it throws TIMEOUT. */
  readTimeoutMs: number;
  /** DTORCH_SEGMENT_NODES: recorded nodes per segment before it is flushed (default 256). */
  segmentNodes: number;
}

function positiveInt(raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): DTorchConfig {
  return {
    logLevel: env['DTORCH_LOG'] ?? 'warn',
    nativePath: env['DTORCH_NATIVE_PATH'] || undefined,
    // on while developing; off under NODE_ENV=production unless asked for
    captureStacks: env['DTORCH_CAPTURE_STACKS'] ? env['DTORCH_CAPTURE_STACKS'] !== '0' : env['NODE_ENV'] !== 'production',
    readTimeoutMs: positiveInt(env['DTORCH_READ_TIMEOUT_MS'], 600_000),
    segmentNodes: positiveInt(env['DTORCH_SEGMENT_NODES'], 256),
  };
}

export const config: DTorchConfig = readConfig();
