// Classifier-free guidance, one module for every pipeline: the prediction moved from the
// negative prompt's toward the prompt's, uncond + scale · (cond − uncond), as SD3's guidance
// (guidance_scale > 1) and Flux's true CFG (true_cfg_scale > 1 with a negative prompt) do.
// The two branches run as diffusers runs them for each family, one transformer call on the
// batch [negative; positive] (SD3) or two calls (Flux), and batched whenever the mesh has a dim
// named 'cfg' (CFG parallel, as xDiT's) that can split them: the batch is split over it, each
// half of the mesh runs one branch, and the prediction is gathered for the combination.
import * as dt from '@dtorch/api';
import { log } from '@dtorch/common';
import { BOTH_BRANCHES } from '../cache/step_cache.js';

/** How the two branches run: not at all ('off'), as two transformer calls, or as one on [negative; positive]. */
export type GuidanceBranches = 'off' | 'separate' | 'batched';

/** A call's guidance: the scale, and how its branches run. */
export interface Guidance {
  /** The scale of the combination (1: the prompt's prediction alone). */
  readonly scale: number;
  /** How the branches run. */
  readonly branches: GuidanceBranches;
  /** Batched because the family batches them (SD3), not only because a 'cfg' dim splits them. */
  readonly familyBatched: boolean;
}

/** What decides a call's guidance. */
export interface GuidanceChoice {
  /** The scale. */
  scale: number;
  /** Whether guidance runs (a negative branch is wanted: SD3's scale > 1; Flux's scale > 1 with a negative prompt). */
  on: boolean;
  /** The family runs its two branches as one batch, as diffusers' SD3 does (Flux's run as two calls). */
  batched: boolean;
  /**
   * The latents stay split over 'dp' between steps (Flux's); a batch [x; x] would interleave
   * their pieces, so on a mesh with 'dp' such a family runs the branches as two calls.
   */
  latentsSplitOverDp: boolean;
  /** What the message names the guidance ("true CFG's two branches (trueCfgScale > 1 with a negative prompt)"). */
  describe: string;
}

/** The mesh dims a batch [negative; positive] is split over, in that order of preference. */
export const GUIDANCE_BATCH_DIMS = ['cfg', 'dp'] as const;

/**
 * The guidance of a call on `mesh`: off, batched (the family's way, or on a 'cfg' dim, which
 * splits the batch), or two calls. A 'cfg' dim that splits nothing (guidance off, or two calls)
 * repeats the work on it: a warning says so.
 */
export function chooseGuidance(what: string, mesh: dt.DeviceMesh, choice: GuidanceChoice): Guidance {
  const names = mesh.dimNames ?? [];
  const cfgDim = names.includes('cfg');
  const canBatch = !(choice.latentsSplitOverDp && names.includes('dp'));
  const branches: GuidanceBranches = !choice.on ? 'off' : choice.batched || (cfgDim && canBatch) ? 'batched' : 'separate';
  if (cfgDim && branches !== 'batched') {
    log.warn(`${what}: the mesh dim 'cfg' splits ${choice.describe}; ${choice.on ? "with 'dp'" : 'without them'} the work is repeated on it`);
  }
  return { scale: choice.scale, branches, familyBatched: choice.batched };
}

/** The text inputs of one call's transformer calls: the prompt's (and the negative prompt's), or both batched. */
export type GuidedInputs<T> = { readonly positive: T; readonly negative?: T } | { readonly batched: T };

/**
 * Which branch a transformer call runs, as diffusers names its cache contexts: the prompt's
 * ('cond'), the negative prompt's ('uncond'), or both batched: 'cond' where the family batches
 * them (diffusers' batched pipelines keep one cache for the batch), BOTH_BRANCHES where only
 * the mesh does (each half its branch's cache, as the family's two calls would keep).
 */
export type GuidanceBranch = 'cond' | 'uncond' | typeof BOTH_BRANCHES;

/**
 * The guided prediction at latents `x`: `predict(x, text, branch)` (the transformer) for the
 * prompt, or for both branches (batched, or one call each, the prompt's first), then combined.
 */
export function guidedPrediction<T>(guidance: Guidance, inputs: GuidedInputs<T>, x: dt.Tensor, predict: (x: dt.Tensor, text: T, branch: GuidanceBranch) => dt.Tensor): dt.Tensor {
  if ('batched' in inputs) {
    const rows = x.shape[0]!;
    const out = predict(dt.cat([x, x], 0), inputs.batched, guidance.familyBatched ? 'cond' : BOTH_BRANCHES);
    // split over 'cfg': gathered for the combination
    const whole = out.placements.every((p) => p.isReplicate()) ? out : out.redistribute(out.placements.map(() => dt.Replicate()));
    const [unconditional, conditional] = whole.split([rows, rows], 0) as [dt.Tensor, dt.Tensor];
    return combine(unconditional, conditional, guidance.scale);
  }
  const conditional = predict(x, inputs.positive, 'cond');
  if (!inputs.negative) return conditional;
  return combine(predict(x, inputs.negative, 'uncond'), conditional, guidance.scale);
}

/** uncond + scale · (cond − uncond). */
export function combine(unconditional: dt.Tensor, conditional: dt.Tensor, scale: number): dt.Tensor {
  return unconditional.add(conditional.sub(unconditional).mul(scale));
}
