export { CACHE_KINDS, FIRST_BLOCK_DEFAULT_THRESHOLD, checkCacheConfig, parseCacheConfig, type CacheConfig, type FirstBlockCacheConfig } from './cache_config.js';
export { BOTH_BRANCHES, FirstBlockCache, type CacheDecision, type FirstBlockRun } from './first_block_cache.js';
export { StepCacheModel } from './step_cache_model.js';
