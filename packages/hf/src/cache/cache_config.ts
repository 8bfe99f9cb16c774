// What a step cache is asked for: diffusers' cache configs (hooks/first_block_cache.py's
// FirstBlockCacheConfig), written as a tagged object, { kind: 'first-block', threshold }, and
// the CLI's spelling of it, "first-block:0.12".
import { DTorchError, ErrorCode, checkOptions, invalidParameter } from '@dtorch/common';

/** First-Block Cache (ParaAttention's; diffusers' FirstBlockCacheConfig). */
export interface FirstBlockCacheConfig {
  readonly kind: 'first-block';
  /**
   * The remaining blocks run when the first block's residual changed by more than this since the
   * last step that ran them (absmean(r − r_prev) / absmean(r_prev)); default 0.05, as diffusers.
   * Higher skips more steps, at the image's expense.
   */
  readonly threshold?: number;
}

/** A step cache's config (enableCache). */
export type CacheConfig = FirstBlockCacheConfig;

/** The cache kinds DTorch runs. */
export const CACHE_KINDS = ['first-block'] as const;

/** diffusers' FirstBlockCacheConfig default. */
export const FIRST_BLOCK_DEFAULT_THRESHOLD = 0.05;

/** `config` checked, its defaults filled in; a DTorchError naming what is wrong otherwise. */
export function checkCacheConfig(what: string, config: unknown): Required<CacheConfig> {
  const o = checkOptions<FirstBlockCacheConfig>(`${what} config`, config as FirstBlockCacheConfig);
  if (!(CACHE_KINDS as readonly unknown[]).includes(o.kind)) {
    throw invalidParameter(`${what} config.kind`, `one of ${CACHE_KINDS.map((k) => `'${k}'`).join(', ')}`, o.kind);
  }
  const threshold = o.threshold ?? FIRST_BLOCK_DEFAULT_THRESHOLD;
  if (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < 0) {
    throw invalidParameter(`${what} config.threshold`, 'a finite number ≥ 0 (e.g. 0.12; 0 runs every step)', o.threshold);
  }
  return { kind: o.kind!, threshold };
}

/** The CLI's "first-block:0.12" (or "first-block" for the default threshold) as a config. */
export function parseCacheConfig(text: string): Required<CacheConfig> {
  const [kind, threshold, ...rest] = text.split(':');
  const number = threshold === undefined || threshold === '' ? undefined : Number(threshold);
  if (rest.length > 0 || (number !== undefined && Number.isNaN(number))) {
    throw new DTorchError(ErrorCode.InvalidArgument, `--cache "${text}": write kind[:threshold], e.g. first-block:0.12 (kinds: ${CACHE_KINDS.join(', ')})`);
  }
  return checkCacheConfig('--cache', { kind, ...(number === undefined ? {} : { threshold: number }) });
}
