// The step-cache methods of a diffusion transformer (diffusers' CacheMixin: enable_cache,
// disable_cache, cache_context): a block cache (first_block_cache.ts, mag_cache.ts) is what the
// model's forward runs its blocks through (blockCache); TaylorSeer (taylorseer_cache.ts) hooks
// the blocks' attentions and leaves the forward as it is.
import { DTorchError, ErrorCode, log } from '@dtorch/common';
import { PreTrainedModel } from '../loading/pretrained_model.js';
import { checkCacheConfig, type CacheConfig } from './cache_config.js';
import { FirstBlockCache } from './first_block_cache.js';
import { MagCache } from './mag_cache.js';
import type { BlockCache, StepCache } from './step_cache.js';
import { TAYLORSEER_ATTENTIONS, TaylorSeerCache } from './taylorseer_cache.js';

/** A transformer whose steps can be cached: FluxTransformer2DModel, SD3Transformer2DModel. */
export abstract class StepCacheModel extends PreTrainedModel {
  #cache: FirstBlockCache | MagCache | TaylorSeerCache | undefined;

  /** The cache enableCache() set, or undefined. */
  get stepCache(): StepCache | undefined {
    return this.#cache;
  }

  /** The cache the model's forward runs its blocks through (First-Block Cache, MagCache), if that is the cache. */
  protected get blockCache(): BlockCache | undefined {
    return this.#cache instanceof TaylorSeerCache ? undefined : this.#cache;
  }

  /**
   * Caches the transformer's steps, as diffusers' `transformer.enable_cache(config)`:
   * `{ kind: 'first-block', threshold }` runs the blocks after the first only when the first
   * block's output changed enough since the last step that ran them (first_block_cache.ts);
   * `{ kind: 'mag', magRatios, threshold, ... }` skips every block while the residual's magnitude
   * ratios say it barely changes (mag_cache.ts);
   * `{ kind: 'taylorseer', cacheInterval, ... }` predicts the blocks' attentions between full
   * steps from a Taylor series of their outputs (taylorseer_cache.ts). A pipeline resets the
   * cache at each generate; a direct caller calls stepCache.reset().
   */
  enableCache(config: CacheConfig): void {
    const what = `${this.constructor.name}.enableCache`;
    const checked = checkCacheConfig(what, config);
    if (this.#cache) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a '${this.#cache.kind}' cache is enabled already; disableCache() first`);
    if (checked.kind === 'first-block' || checked.kind === 'mag') {
      this.checkCacheable(what);
      this.#cache = checked.kind === 'mag' ? new MagCache(checked) : new FirstBlockCache(checked);
      return;
    }
    const attentions = [...this.namedModules()].filter(([name]) => TAYLORSEER_ATTENTIONS.some((p) => p.test(name))).map(([, m]) => m);
    if (attentions.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: TaylorSeer predicts the blocks' attentions (modules named like transformer_blocks.N.attn), and this model has none`);
    this.#cache = new TaylorSeerCache(checked, attentions);
  }

  /** Stops caching (diffusers' disable_cache), freeing what the cache held and taking its hooks off. */
  disableCache(): void {
    if (!this.#cache) log.warn(`${this.constructor.name}.disableCache: no cache is enabled; nothing to disable`);
    this.#cache?.detach();
    this.#cache = undefined;
  }

  /** Runs `fn` with this model's calls in cache context `name` (diffusers' cache_context); `fn` as it is without a cache. */
  cacheContext<T>(name: string, fn: () => T): T {
    return this.#cache ? this.#cache.withContext(name, fn) : fn();
  }

  /** Frees the weights and what the cache holds. */
  override dispose(): void {
    this.#cache?.detach();
    super.dispose();
  }

  /** Throws when the model's blocks cannot be cached (a first block and a last one, not the same, are needed). */
  protected abstract checkCacheable(what: string): void;
}
