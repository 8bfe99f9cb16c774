// What the operator sets for `dtorch serve` (createImageServer's options): where it listens, the
// token, the limits every request is checked against, the queue and batch sizes, the output
// folder. checkServeOptions refuses a bad setting before anything loads, with a DTorchError that
// names it, and a non-loopback host without a token (the service would be open to the network).
import { invalid } from '../cli/invalid_flag.js';
import { isLoopback } from './auth.js';

/** The limits each request is checked against (a request over one is a 400 naming the field). */
export interface ServeLimits {
  /** The largest width or height in pixels (default 1024). */
  maxSide: number;
  /** The most denoising steps (default 50). */
  maxSteps: number;
  /** The most images of one request, `n` (default 4). */
  maxImages: number;
  /** The longest prompt or negative prompt, in characters (default 2000). */
  maxPromptLength: number;
}

/** createImageServer's settings; `dtorch serve`'s flags. */
export interface ServeOptions {
  /** The address to listen on (default 127.0.0.1); one that is not loopback needs `token`. */
  host?: string;
  /** The port (default 8080; 0: any free one). */
  port?: number;
  /** The bearer token every /v1 request must carry (Authorization: Bearer ...); required off loopback. */
  token?: string;
  /** Where results and the job journal are written (default ./dtorch-serve). */
  outputDir?: string;
  /** Jobs waiting at most (default 32); one more is a 429 with Retry-After. */
  maxQueue?: number;
  /** Queued requests of the same size, steps and guidance run as one batch of at most this many images (default 1: no batching). */
  maxBatch?: number;
  /** How long a synchronous /v1/images/generations request waits for its images, in seconds (default 600). */
  requestTimeoutSeconds?: number;
  /** Finished jobs kept with their files (default 1000); older ones are forgotten and their files deleted. */
  keepJobs?: number;
  /** On shutdown, cancel the running job between steps instead of finishing it (default false). */
  cancelOnShutdown?: boolean;
  /** The most seconds shutdown waits for the running job before cancelling it (default 120). */
  shutdownTimeoutSeconds?: number;
  /** Request limits (defaults above). */
  limits?: Partial<ServeLimits>;
  /** Fastify's logger: false for none, or a pino level ('info' default). */
  logLevel?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** ServeOptions with every default filled in. */
export interface CheckedServeOptions extends Required<Omit<ServeOptions, 'token' | 'limits'>> {
  /** The bearer token, if any. */
  token: string | undefined;
  /** Every limit. */
  limits: ServeLimits;
}

/** The default limits. */
export const defaultLimits: ServeLimits = { maxSide: 1024, maxSteps: 50, maxImages: 4, maxPromptLength: 2000 };

function wholeNumber(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(`serve: ${name} must be a whole number from ${min} to ${max}, but received ${String(value)}`);
  }
  return value;
}

/** `options` checked, defaults filled in; throws INVALID_ARGUMENT naming the setting. */
export function checkServeOptions(options: ServeOptions = {}): CheckedServeOptions {
  const host = options.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host.trim() === '') throw invalid('serve: host must be an address such as 127.0.0.1 or 0.0.0.0');
  const token = options.token === undefined || options.token === '' ? undefined : options.token;
  if (token !== undefined && (typeof token !== 'string' || token.length < 16 || /\s/.test(token))) {
    throw invalid('serve: the token must be at least 16 characters with no spaces (e.g. openssl rand -hex 32)');
  }
  if (!isLoopback(host) && token === undefined) {
    throw invalid(`serve: --host ${host} is not a loopback address: anyone who reaches it could run jobs; give --token-file FILE (a file whose first line is the token), or listen on 127.0.0.1`);
  }
  const limits = { ...defaultLimits, ...options.limits };
  wholeNumber('limits.maxSide', limits.maxSide, 16, 16384);
  wholeNumber('limits.maxSteps', limits.maxSteps, 1, 1000);
  wholeNumber('limits.maxImages', limits.maxImages, 1, 64);
  wholeNumber('limits.maxPromptLength', limits.maxPromptLength, 1, 1_000_000);
  const logLevel = options.logLevel ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) throw invalid(`serve: logLevel must be fatal, error, warn, info, debug, trace or silent, but received ${String(logLevel)}`);
  return {
    host,
    port: wholeNumber('port', options.port ?? 8080, 0, 65535),
    token,
    outputDir: options.outputDir ?? 'dtorch-serve',
    maxQueue: wholeNumber('maxQueue', options.maxQueue ?? 32, 1, 100_000),
    maxBatch: wholeNumber('maxBatch', options.maxBatch ?? 1, 1, 64),
    keepJobs: wholeNumber('keepJobs', options.keepJobs ?? 1000, 1, 10_000_000),
    requestTimeoutSeconds: wholeNumber('requestTimeoutSeconds', options.requestTimeoutSeconds ?? 600, 1, 86_400),
    cancelOnShutdown: options.cancelOnShutdown ?? false,
    shutdownTimeoutSeconds: wholeNumber('shutdownTimeoutSeconds', options.shutdownTimeoutSeconds ?? 120, 0, 86_400),
    limits,
    logLevel,
  };
}
