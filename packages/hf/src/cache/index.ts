export {
  CACHE_KINDS,
  FIRST_BLOCK_DEFAULT_THRESHOLD,
  checkCacheConfig,
  parseCacheConfig,
  type CacheConfig,
  type CheckedCacheConfig,
  type CheckedMagCacheConfig,
  type CheckedTaylorSeerCacheConfig,
  type FirstBlockCacheConfig,
  type MagCacheConfig,
  type TaylorSeerCacheConfig,
} from './cache_config.js';
export { BOTH_BRANCHES, StepCache, type BlockCache, type CacheDecision, type FirstBlockRun } from './step_cache.js';
export { FirstBlockCache } from './first_block_cache.js';
export { FLUX_MAG_RATIOS, MagCache } from './mag_cache.js';
export { TaylorSeerCache, TAYLORSEER_ATTENTIONS } from './taylorseer_cache.js';
export { StepCacheModel } from './step_cache_model.js';
