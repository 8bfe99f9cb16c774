// What a step cache is asked for: diffusers' cache configs (hooks/first_block_cache.py's
// FirstBlockCacheConfig), written as a tagged object, { kind: 'first-block', threshold }, and
// the CLI's spelling of it, "first-block:0.12".
import { DTorchError, ErrorCode, checkOptions, invalidParameter } from '@dtorch/common';

/** First-Block Cache (ParaAttention's; diffusers' FirstBlockCacheConfig). */
export interface FirstBlockCacheConfig {
  /** First-Block Cache. */
  readonly kind: 'first-block';
  /**
   * The remaining blocks run when the first block's residual changed by more than this since the
   * last step that ran them (absmean(r − r_prev) / absmean(r_prev)); default 0.05, as diffusers.
   * Higher skips more steps, at the image's expense.
   */
  readonly threshold?: number;
}

/** TaylorSeer (diffusers' TaylorSeerCacheConfig): the blocks' attentions predicted between full calls. */
export interface TaylorSeerCacheConfig {
  /** TaylorSeer. */
  readonly kind: 'taylorseer';
  /** One call in this many runs the attentions in full after the warm-up; default 5. */
  readonly cacheInterval?: number;
  /** The first calls of each context that run in full (to start the series); default 3. */
  readonly disableCacheBeforeStep?: number;
  /** From this call on, every call runs in full; default never. */
  readonly disableCacheAfterStep?: number;
  /** The Taylor series' highest order; default 1. */
  readonly maxOrder?: number;
  /** The factors' dtype; default bfloat16, as diffusers. */
  readonly taylorFactorsDtype?: 'bfloat16' | 'float16' | 'float32';
}

/** MagCache (diffusers' MagCacheConfig): every block skipped while the residual's magnitude ratios say it barely changes. */
export interface MagCacheConfig {
  /** MagCache. */
  readonly kind: 'mag';
  /** The accumulated error Σ |1 − Π ratio| up to which calls are skipped; default 0.06. */
  readonly threshold?: number;
  /** At most this many calls skipped in a row; default 3. */
  readonly maxSkipSteps?: number;
  /** The first fraction of the steps that never skip; default 0.2. */
  readonly retentionRatio?: number;
  /** The steps of a run (the ratios are stretched to it; a context starts over after it); default 28. */
  readonly numInferenceSteps?: number;
  /** The model's ratios per step (FLUX_MAG_RATIOS for FLUX.1), measured with `calibrate`; required unless calibrating. */
  readonly magRatios?: readonly number[];
  /** Runs every block and reports each step's ratio (timings.cache's statistics) to use as magRatios; default false. */
  readonly calibrate?: boolean;
}

/** A step cache's config (enableCache). */
export type CacheConfig = FirstBlockCacheConfig | TaylorSeerCacheConfig | MagCacheConfig;

/** TaylorSeer's config with its defaults filled in (disableCacheAfterStep may stay undefined). */
export type CheckedTaylorSeerCacheConfig = Required<Omit<TaylorSeerCacheConfig, 'disableCacheAfterStep'>> & Pick<TaylorSeerCacheConfig, 'disableCacheAfterStep'>;

/** MagCache's config with its defaults filled in (magRatios undefined while calibrating). */
export type CheckedMagCacheConfig = Required<Omit<MagCacheConfig, 'magRatios'>> & Pick<MagCacheConfig, 'magRatios'>;

/** A config with its defaults filled in. */
export type CheckedCacheConfig = Required<FirstBlockCacheConfig> | CheckedTaylorSeerCacheConfig | CheckedMagCacheConfig;

/** The cache kinds DTorch runs. */
export const CACHE_KINDS = ['first-block', 'taylorseer', 'mag'] as const;

/** diffusers' FirstBlockCacheConfig default. */
export const FIRST_BLOCK_DEFAULT_THRESHOLD = 0.05;

const KEYS = { 'first-block': ['kind', 'threshold'], mag: ['kind', 'threshold', 'maxSkipSteps', 'retentionRatio', 'numInferenceSteps', 'magRatios', 'calibrate'], taylorseer: ['kind', 'cacheInterval', 'disableCacheBeforeStep', 'disableCacheAfterStep', 'maxOrder', 'taylorFactorsDtype'] };

/** `config` checked, its defaults filled in; a DTorchError naming what is wrong otherwise. */
export function checkCacheConfig(what: string, config: unknown): CheckedCacheConfig {
  const o = checkOptions<Record<string, unknown>>(`${what} config`, config);
  if (!(CACHE_KINDS as readonly unknown[]).includes(o['kind'])) {
    throw invalidParameter(`${what} config.kind`, `one of ${CACHE_KINDS.map((k) => `'${k}'`).join(', ')}`, o['kind']);
  }
  const kind = o['kind'] as CacheConfig['kind'];
  const unknown = Object.keys(o).filter((k) => !KEYS[kind].includes(k));
  if (unknown.length > 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a '${kind}' cache takes ${KEYS[kind].join(', ')}; not ${unknown.join(', ')}`);
  const number = (name: string, fallback: number): number => {
    const value = o[name] ?? fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw invalidParameter(`${what} config.${name}`, 'a finite number ≥ 0', o[name]);
    return value;
  };
  if (kind === 'first-block') return { kind, threshold: number('threshold', FIRST_BLOCK_DEFAULT_THRESHOLD) };
  const whole = (name: string, fallback: number | undefined, min: number): number | undefined => {
    const value = o[name] ?? fallback;
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw invalidParameter(`${what} config.${name}`, `a whole number ≥ ${min}`, o[name]);
    return value;
  };
  if (kind === 'mag') {
    const calibrate = o['calibrate'] ?? false;
    if (typeof calibrate !== 'boolean') throw invalidParameter(`${what} config.calibrate`, 'true or false', calibrate);
    const ratios = o['magRatios'];
    if (ratios === undefined && !calibrate) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: MagCache needs the model's magRatios (FLUX_MAG_RATIOS for FLUX.1); for another model or schedule, run once with { calibrate: true } and pass timings.cache's statistics as magRatios`);
    }
    if (ratios !== undefined && (!Array.isArray(ratios) || ratios.length === 0 || !ratios.every((r) => typeof r === 'number' && Number.isFinite(r)))) {
      throw invalidParameter(`${what} config.magRatios`, 'an array of finite numbers, one per step', ratios);
    }
    return {
      kind, threshold: number('threshold', 0.06), maxSkipSteps: whole('maxSkipSteps', 3, 0)!, retentionRatio: number('retentionRatio', 0.2),
      numInferenceSteps: whole('numInferenceSteps', 28, 1)!, calibrate, ...(ratios !== undefined && { magRatios: [...(ratios as number[])] }),
    };
  }
  const dtype = o['taylorFactorsDtype'] ?? 'bfloat16';
  if (!['bfloat16', 'float16', 'float32'].includes(dtype as string)) throw invalidParameter(`${what} config.taylorFactorsDtype`, "'bfloat16', 'float16' or 'float32'", dtype);
  return {
    kind,
    cacheInterval: whole('cacheInterval', 5, 1)!,
    disableCacheBeforeStep: whole('disableCacheBeforeStep', 3, 0)!,
    disableCacheAfterStep: whole('disableCacheAfterStep', undefined, 0),
    maxOrder: whole('maxOrder', 1, 0)!,
    taylorFactorsDtype: dtype as 'bfloat16' | 'float16' | 'float32',
  };
}

/**
 * The CLI's spelling as a config: "first-block:0.12" (a threshold; "first-block" for the default)
 * or "taylorseer:5" (a cache interval; "taylorseer" for diffusers' defaults). MagCache needs its
 * model's ratios: the library's enableCache takes it.
 */
export function parseCacheConfig(text: string): CheckedCacheConfig {
  const [kind, setting, ...rest] = text.split(':');
  const number = setting === undefined || setting === '' ? undefined : Number(setting);
  if (rest.length > 0 || (number !== undefined && Number.isNaN(number))) {
    throw new DTorchError(ErrorCode.InvalidArgument, `--cache "${text}": write first-block[:threshold] (e.g. first-block:0.12) or taylorseer[:interval] (e.g. taylorseer:5)`);
  }
  const key = kind === 'taylorseer' ? 'cacheInterval' : 'threshold';
  return checkCacheConfig('--cache', { kind, ...(number === undefined ? {} : { [key]: number }) });
}
