// parallelize: a model's parallel plan applied to it from outside, as diffusers'
// enable_parallelism and PyTorch's parallelize_module do. A plan is data in the model's folder
// (models/<name>/<name>_plans.ts): a TP plan (which layers split over 'tp') and a context-parallel
// plan (which tensors split over 'ulysses' / 'ring' / 'dp' / 'cfg', where the sequence gathers,
// how token streams join). The model's code stays single-device code; each model's constructor
// ends by calling parallelize, so every way of making one (fromPretrained, the random-weight and
// tiny paths, `new Model(config, { mesh })`) gives the parallel model. A model without a plan runs
// replicated: every device computes everything.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { checkKnownOptions, checkOptions, invalidParameter } from '@dtorch/common';
import { applyContextParallel, checkContextParallelPlan, type ContextParallelPlan } from './context_parallel.js';
import { checkDivides } from './mesh_dims.js';
import { applyTpPlan, type TpPlan } from './tp_plan.js';

/** How a model maps onto mesh dims: its TP plan and its context-parallel plan, each optional. */
export interface ParallelPlan {
  /** The layers split over 'tp'. */
  readonly tp?: TpPlan;
  /** The tensors split over 'ulysses', 'ring', 'dp' and 'cfg', where the sequence gathers, and how token streams join. */
  readonly cp?: ContextParallelPlan;
}

// the context-parallel hooks of each model parallelize has put them on
const contextParallel = new WeakMap<nn.Module, nn.RemovableHandle>();

// What a module keeps from its last calls was made under the plan it had (Flux's rotary tables,
// split as its ids were): a new plan, or none, makes it again.
function releaseCallCaches(model: nn.Module): void {
  for (const [, m] of model.namedModules()) {
    const cached = m as nn.Module & { releaseCallCache?: unknown };
    if (typeof cached.releaseCallCache === 'function') (cached.releaseCallCache as () => void)();
  }
}

/**
 * Applies `plan` to `model` on `mesh`: the layers of its TP plan become their parallel forms
 * (when `mesh` has a 'tp' dim; layers in that form already stay), and its context-parallel plan
 * goes on as forward hooks and the joint-attention hook, replacing any this function put on
 * before; what the model kept from its last calls (releaseCallCache) is made again on the next.
 * Returns the model. A plan not of its type, or naming a layer without the parallel form it asks
 * for, is an INVALID_ARGUMENT error that changes nothing. The constructors of this package's
 * models call it with their plan.
 */
export function parallelize<M extends nn.Module>(model: M, mesh: dt.DeviceMesh, plan: ParallelPlan): M {
  if (!(model instanceof nn.Module)) throw invalidParameter('parallelize model', 'an nn.Module', model);
  if (!(mesh instanceof dt.DeviceMesh)) throw invalidParameter('parallelize mesh', 'a DeviceMesh', mesh);
  if (typeof plan !== 'object' || plan === null) throw invalidParameter('parallelize plan', 'a ParallelPlan ({ tp?, cp? })', plan);
  const { tp, cp } = checkKnownOptions<ParallelPlan>('parallelize plan', plan, ['tp', 'cp']);
  for (const [path, style] of Object.entries(checkOptions<TpPlan>('parallelize plan.tp', tp))) {
    if (style !== 'colwise' && style !== 'rowwise') throw invalidParameter(`parallelize plan.tp "${path}"`, "'colwise' or 'rowwise'", style);
  }
  if (cp !== undefined) checkContextParallelPlan(cp);
  if (tp) applyTpPlan(model, mesh, tp);
  removeContextParallel(model);
  if (cp) contextParallel.set(model, applyContextParallel(model, cp));
  releaseCallCaches(model);
  return model;
}

/**
 * Takes the context-parallel hooks parallelize put on `model` off: it then computes as one
 * device does, on its inputs as they come (layers split over 'tp' stay split; their outputs are
 * whole), and what it kept from its last calls is made again. Returns whether there were any.
 */
export function removeContextParallel(model: nn.Module): boolean {
  const hooks = contextParallel.get(model);
  if (!hooks) return false;
  hooks.remove();
  contextParallel.delete(model);
  releaseCallCaches(model);
  return true;
}

/**
 * An INVALID_MESH error when `plan` would split `heads` (the config's `what`, e.g.
 * num_attention_heads) over a mesh dim whose size does not divide them: 'tp' under a TP plan, and
 * the dim the joint-attention hook splits heads over. A constructor checks before it builds.
 */
export function checkHeadsDivide(plan: ParallelPlan, mesh: dt.DeviceMesh, model: string, what: string, heads: number): void {
  if (plan.tp) checkDivides(mesh, 'tp', model, what, heads);
  const over = plan.cp?.jointAttention?.headsOver;
  if (over) checkDivides(mesh, over, model, what, heads);
}
