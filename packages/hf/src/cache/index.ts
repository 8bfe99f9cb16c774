export { CACHE_KINDS, FIRST_BLOCK_DEFAULT_THRESHOLD, checkCacheConfig, parseCacheConfig, type CacheConfig, type CheckedCacheConfig, type FirstBlockCacheConfig, type TaylorSeerCacheConfig } from './cache_config.js';
export { BOTH_BRANCHES, StepCache, type CacheDecision } from './step_cache.js';
export { FirstBlockCache, type FirstBlockRun } from './first_block_cache.js';
export { TaylorSeerCache, TAYLORSEER_ATTENTIONS } from './taylorseer_cache.js';
export { StepCacheModel } from './step_cache_model.js';
