// Context-parallel plans: which tensors of a model are split by tokens over the mesh dims named
// 'ulysses' and 'ring' (and by batch over 'dp' and 'cfg'), where the sequence is gathered, and
// how token streams join for attention, as data in each model's folder (diffusers' `_cp_plan`
// and ContextParallelConfig). The plan names modules by path; applied from outside the model,
// its splits and gathers are forward hooks on those modules and its joint-attention hook is set
// on every module that joins streams, so the model's forward stays single-device code.
//   inputs       before the module runs, the arguments it names (by position, or by key in an
//                options object) placed whole: tokens on 'ulysses'/'ring', the batch on 'dp' and
//                (where the rows divide) 'cfg', replicated elsewhere (a model owns how its inputs
//                lie); one that is not a tensor with that dim is left to the model's own checks
//   splitOutput  after it runs, its output's tokens split on 'ulysses'/'ring', its other
//                placements kept (an activation keeps the batch split it came with)
//   gatherOutput after it runs, its output whole on 'ulysses'/'ring', other placements kept
// A split or gather that finds its tensor placed already adds nothing (shardTokens,
// gatherSequence); inputs are redistributed where and as the model placed them itself before.
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';
import { checkKnownOptions, checkOptions, invalidParameter, isInteger } from '@dtorch/common';
import { hasJointAttention, type JointAttention } from './joint_attention.js';
import { entryFor } from './module_paths.js';
import { gatherSequence, inputPlacements, shardTokens } from './sequence_parallel.js';

/** How a plan places a tensor argument: by tokens over 'ulysses' and 'ring', by batch over 'dp' and 'cfg'. */
export interface InputSplit {
  /** The dim of the tokens (negative counts from the end), split over 'ulysses' and 'ring'. */
  readonly tokens?: number;
  /** Whether dim 0 is the batch: split over 'dp', and over 'cfg' where its rows divide. */
  readonly batch?: boolean;
}

/** What a context-parallel plan does around one module. */
export interface ModuleSplits {
  /**
   * Arguments placed before the module runs, named by position ('0', '1', ...) or by key in the
   * options object it takes ('encoderHiddenStates'); dims the split does not name are replicated.
   */
  readonly inputs?: Readonly<Record<string, InputSplit>>;
  /** The dim of the output's tokens, split over 'ulysses' and 'ring' after the module runs (other placements kept). */
  readonly splitOutput?: number;
  /** The output gathered whole over 'ulysses' and 'ring' after the module runs (other placements kept). */
  readonly gatherOutput?: boolean;
}

/** A model's context-parallel plan: what happens around which modules, and how its token streams join. */
export interface ContextParallelPlan {
  /** Module path patterns ('' the model, '*' any one path part) to what happens around those modules. */
  readonly modules: Readonly<Record<string, ModuleSplits>>;
  /** How the model's token streams join for attention (pieceByPieceJoin when absent). */
  readonly jointAttention?: JointAttention;
}

/** An INVALID_ARGUMENT error unless every entry of `plan` is as its type says. */
export function checkContextParallelPlan(plan: ContextParallelPlan): void {
  if (typeof plan?.modules !== 'object' || plan.modules === null) throw invalidParameter('context-parallel plan', '{ modules, jointAttention? }', plan);
  for (const [path, entry] of Object.entries(plan.modules)) {
    const what = `context-parallel plan entry "${path}"`;
    const { inputs, splitOutput, gatherOutput } = checkKnownOptions<ModuleSplits>(what, entry, ['inputs', 'splitOutput', 'gatherOutput']);
    for (const [name, split] of Object.entries(checkOptions<Record<string, InputSplit>>(`${what} inputs`, inputs))) {
      const { tokens, batch } = checkKnownOptions<InputSplit>(`${what} inputs.${name}`, split, ['tokens', 'batch']);
      if (tokens !== undefined && !isInteger(tokens)) throw invalidParameter(`${what} inputs.${name}.tokens`, 'an integer dim', tokens);
      if (batch !== undefined && typeof batch !== 'boolean') throw invalidParameter(`${what} inputs.${name}.batch`, 'a boolean', batch);
    }
    if (splitOutput !== undefined && !isInteger(splitOutput)) throw invalidParameter(`${what} splitOutput`, 'an integer dim', splitOutput);
    if (gatherOutput !== undefined && typeof gatherOutput !== 'boolean') throw invalidParameter(`${what} gatherOutput`, 'a boolean', gatherOutput);
  }
  const join = plan.jointAttention;
  if (join !== undefined && [join.join, join.joinHeads, join.split].some((f) => typeof f !== 'function')) {
    throw invalidParameter('context-parallel plan jointAttention', 'a JointAttention ({ join, joinHeads, split })', join);
  }
}

// `arg` placed as `split` says; anything but a tensor with the dims it names is left as it is
function place(arg: unknown, split: InputSplit): unknown {
  if (!(arg instanceof dt.Tensor)) return arg;
  const tokens = split.tokens !== undefined && split.tokens < 0 ? split.tokens + arg.ndim : split.tokens;
  if ((tokens !== undefined && (tokens < 0 || tokens >= arg.ndim)) || (split.batch && arg.ndim === 0)) return arg;
  return arg.redistribute(inputPlacements(arg.mesh, tokens, split.batch ?? false, arg.shape[0]));
}

const isOptions = (value: unknown) => typeof value === 'object' && value !== null && [Object.prototype, null].includes(Object.getPrototypeOf(value));

// the pre-hook that places the arguments `inputs` names (in its order: positions, then keys), an
// options object copied rather than changed
const placeInputs = (inputs: Readonly<Record<string, InputSplit>>) => (_: nn.Module, args: unknown[]) => {
  const placed = [...args];
  const at = placed.findIndex(isOptions);
  const options = at >= 0 ? { ...(placed[at] as Record<string, unknown>) } : undefined;
  for (const [name, split] of Object.entries(inputs)) {
    if (/^\d+$/.test(name)) placed[Number(name)] = place(placed[Number(name)], split);
    else if (options && name in options) options[name] = place(options[name], split);
  }
  if (options) placed[at] = options;
  return placed.slice(0, args.length);
};

const onOutput = (placeOutput: (t: dt.Tensor) => dt.Tensor) => (_: nn.Module, __: unknown[], output: unknown) => (output instanceof dt.Tensor ? placeOutput(output) : output);

/**
 * Puts `plan` on `model`: hooks on the modules it names, and its joint-attention hook on every
 * module that joins token streams. Returns a handle whose remove() takes them off again. A plan
 * not of its type is an error before anything goes on.
 */
export function applyContextParallel(model: nn.Module, plan: ContextParallelPlan): nn.RemovableHandle {
  checkContextParallelPlan(plan);
  const handles: nn.RemovableHandle[] = [];
  const joins: [nn.Module & { jointAttention: JointAttention }, JointAttention][] = [];
  for (const [path, module] of model.namedModules()) {
    if (plan.jointAttention && hasJointAttention(module)) {
      joins.push([module, module.jointAttention]);
      module.jointAttention = plan.jointAttention;
    }
    const splits = entryFor(plan.modules, path);
    if (!splits) continue;
    const { inputs, splitOutput, gatherOutput } = splits;
    if (inputs) handles.push(module.registerForwardPreHook(placeInputs(inputs)));
    if (splitOutput !== undefined) handles.push(module.registerForwardHook(onOutput((t) => shardTokens(t, splitOutput))));
    if (gatherOutput) handles.push(module.registerForwardHook(onOutput(gatherSequence)));
  }
  return {
    remove: () => {
      for (const h of handles.splice(0)) h.remove();
      for (const [module, join] of joins.splice(0)) module.jointAttention = join;
    },
  };
}
