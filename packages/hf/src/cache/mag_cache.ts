// MagCache (https://github.com/Zehong-Ma/MagCache) as diffusers' hooks/mag_cache.py: the blocks'
// residual (the last block's image output minus the first block's input) changes in magnitude
// from step to step by a ratio that depends on the model and the schedule, not the prompt
// (`magRatios`, measured once with `calibrate`). After the first `retentionRatio` of the steps, a
// call multiplies the ratios of the steps since the last computed one; while the accumulated
// error Σ |1 − Π ratio| stays within `threshold` for at most `maxSkipSteps` calls, the call runs no
// block at all and adds the last computed residual to its input. The decision needs no value
// from the devices (no host read, unlike First-Block Cache): a mesh takes one device's decisions,
// and a cached step's recorded work has no cut in it.
//
// Each context counts its own calls ('cond', 'uncond'); a batch of both branches
// (BOTH_BRANCHES) keeps one state, which equals the branches' two (their counts and ratios are
// the same; the residual is elementwise). A context starts over after numInferenceSteps calls.
// `calibrate` runs every block and reports each call's ratio, mean over tokens of
// ‖r‖ / (‖r_prev‖ + 1e-8), as the decisions' statistic (diffusers prints them).
import * as dt from '@dtorch/api';
import type { CheckedMagCacheConfig } from './cache_config.js';
import { StepCache, replicated, sameLayout, type BlockCache, type FirstBlockRun } from './step_cache.js';

/** MagCache's ratios for FLUX.1 dev and schnell at 28 steps (diffusers' FLUX_MAG_RATIOS, from the MagCache repository). */
export const FLUX_MAG_RATIOS: readonly number[] = [
  1.0, 1.21094, 1.11719, 1.07812, 1.0625, 1.03906, 1.03125, 1.03906, 1.02344, 1.03125, 1.02344, 0.98047, 1.01562, 1.00781, 1.0, 1.00781, 1.0, 1.00781, 1.0, 1.0,
  0.99609, 0.99609, 0.98047, 0.98828, 0.96484, 0.95703, 0.93359, 0.89062,
];

// one context's state: its step, the accumulators, the last computed residual
interface MagState {
  step: number;
  ratio: number;
  error: number;
  skipped: number;
  residual: dt.Tensor | undefined;
}

/** A transformer's MagCache (see the file's comment). */
export class MagCache extends StepCache implements BlockCache {
  readonly config: CheckedMagCacheConfig;
  /** The ratios per step, stretched to numInferenceSteps as diffusers does (nearest_interp). */
  readonly ratios: readonly number[];
  readonly #states = new Map<string, MagState>();

  constructor(config: CheckedMagCacheConfig) {
    super();
    this.config = config;
    this.ratios = config.magRatios ? nearestInterp(config.magRatios, config.numInferenceSteps) : [];
  }

  /** The image hidden states after the model's last block for the first block's input `input` (see FirstBlockCache.run). */
  run(input: dt.Tensor, first: () => FirstBlockRun): dt.Tensor {
    const key = this.context;
    let s = this.#states.get(key);
    if (!s) this.#states.set(key, (s = { step: 0, ratio: 1, error: 0, skipped: 0, residual: undefined }));
    if (s.residual && !sameLayout(s.residual, input)) this.#start(s); // another size or batch: start over
    const computed = this.#computes(s);
    if (!computed) {
      this.decided(this.branches.map(() => undefined), this.branches.map(() => false));
      const out = input.add(s.residual!);
      this.#advance(s); // after the last step the residual goes
      return out;
    }
    const out = first().rest();
    const residual = dt.keep(out.sub(input));
    const ratio = this.config.calibrate ? this.#ratio(residual, s.residual) : undefined;
    this.decided(this.branches.map(() => ratio), this.branches.map(() => true));
    s.residual?.dispose();
    s.residual = residual;
    this.#advance(s);
    return out;
  }

  protected forget(): void {
    for (const s of this.#states.values()) s.residual?.dispose();
    this.#states.clear();
  }

  // the first steps never skip (retention_ratio of them, rounded)
  get #retention(): number {
    return Math.floor(this.config.retentionRatio * this.config.numInferenceSteps + 0.5);
  }

  // diffusers' rule (MagCacheHeadHook): accumulate the ratios since the last computed call
  #computes(s: MagState): boolean {
    if (this.config.calibrate || s.step < this.#retention) return true;
    s.ratio *= s.step < this.ratios.length ? this.ratios[s.step]! : 1;
    s.skipped += 1;
    s.error += Math.abs(1 - s.ratio);
    if (s.residual && s.error <= this.config.threshold && s.skipped <= this.config.maxSkipSteps) return false;
    [s.ratio, s.skipped, s.error] = [1, 0, 0];
    return true;
  }

  // the next step; after the last one the context starts over
  #advance(s: MagState): void {
    s.step += 1;
    if (s.step >= this.config.numInferenceSteps) this.#start(s);
  }

  #start(s: MagState): void {
    s.residual?.dispose();
    Object.assign(s, { step: 0, ratio: 1, error: 0, skipped: 0, residual: undefined });
  }

  // mean over tokens of ‖r‖ / (‖r_prev‖ + 1e-8), in float32 (1 on a context's first call)
  #ratio(residual: dt.Tensor, previous: dt.Tensor | undefined): number {
    if (!previous) return 1;
    const norm = (t: dt.Tensor) => t.to('float32').square().sum(-1).sqrt();
    const mean = dt.tidy(() => replicated(norm(residual).div(norm(previous).add(1e-8)).mean()));
    try {
      return Number(mean.itemSync());
    } finally {
      mean.dispose();
    }
  }
}

// diffusers' nearest_interp: `source` stretched to `length` entries (torch.round: halves to even, in float32)
export function nearestInterp(source: readonly number[], length: number): number[] {
  if (length === 1) return [source[source.length - 1]!];
  const scale = Math.fround((source.length - 1) / (length - 1));
  return Array.from({ length }, (_, i) => source[roundHalfEven(Math.fround(i * scale))]!);
}

function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}
