// Context-parallel plans: which tensors of a model are split by tokens over the mesh dims named
// 'ulysses' and 'ring' (and by batch over 'dp' and 'cfg'), where the sequence is gathered, and
// how token streams join for attention, as data in each model's folder (diffusers' `_cp_plan`
// and ContextParallelConfig). The plan names modules by path; applied from outside the model,
// its splits and gathers are forward hooks on those modules and its joint-attention hook is set
// on every module that joins streams, so the model's forward stays single-device code.
//   inputs       before the module runs, each tensor argument placed whole: its tokens on
//                'ulysses'/'ring', its batch on 'dp' and (where the rows divide) 'cfg',
//                replicated elsewhere (a model owns how its inputs lie)
//   splitOutput  after it runs, its output's tokens split on 'ulysses'/'ring', its other
//                placements kept (an activation keeps the batch split it came with)
//   gatherOutput after it runs, its output whole on 'ulysses'/'ring', other placements kept
// A hook that finds its tensor placed already adds nothing (shardTokens, gatherSequence);
// input placements are redistributed as a model placed its inputs before.
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';
import { checkKnownOptions, invalidParameter, isInteger } from '@dtorch/common';
import { hasJointAttention, type JointAttention } from './joint_attention.js';
import { entryFor } from './module_paths.js';
import { gatherSequence, inputPlacements, shardTokens } from './sequence_parallel.js';

/** How a plan places a module's tensor arguments: by tokens over 'ulysses' and 'ring', by batch over 'dp' and 'cfg'. */
export interface InputSplit {
  /** The dim of the tokens (negative counts from the end), split over 'ulysses' and 'ring'. */
  readonly tokens?: number;
  /** Whether dim 0 is the batch: split over 'dp', and over 'cfg' where its rows divide. */
  readonly batch?: boolean;
}

/** What a context-parallel plan does around one module. */
export interface ModuleSplits {
  /** Each tensor argument placed before the module runs (dims the split does not name replicated). */
  readonly inputs?: InputSplit;
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
    if (inputs !== undefined) {
      const { tokens, batch } = checkKnownOptions<InputSplit>(`${what} inputs`, inputs, ['tokens', 'batch']);
      if (tokens !== undefined && !isInteger(tokens)) throw invalidParameter(`${what} inputs.tokens`, 'an integer dim', tokens);
      if (batch !== undefined && typeof batch !== 'boolean') throw invalidParameter(`${what} inputs.batch`, 'a boolean', batch);
    }
    if (splitOutput !== undefined && !isInteger(splitOutput)) throw invalidParameter(`${what} splitOutput`, 'an integer dim', splitOutput);
    if (gatherOutput !== undefined && typeof gatherOutput !== 'boolean') throw invalidParameter(`${what} gatherOutput`, 'a boolean', gatherOutput);
  }
  const join = plan.jointAttention;
  if (join !== undefined && [join.join, join.joinHeads, join.split].some((f) => typeof f !== 'function')) {
    throw invalidParameter('context-parallel plan jointAttention', 'a JointAttention ({ join, joinHeads, split })', join);
  }
}

const placeInput = (split: InputSplit) => (arg: unknown) => {
  if (!(arg instanceof dt.Tensor)) return arg;
  const tokens = split.tokens !== undefined && split.tokens < 0 ? split.tokens + arg.ndim : split.tokens;
  return arg.redistribute(inputPlacements(arg.mesh, tokens, split.batch ?? false, arg.shape[0]));
};

const onOutput = (place: (t: dt.Tensor) => dt.Tensor) => (_: nn.Module, __: unknown[], output: unknown) => (output instanceof dt.Tensor ? place(output) : output);

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
    if (inputs) handles.push(module.registerForwardPreHook((_, args) => args.map(placeInput(inputs))));
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
