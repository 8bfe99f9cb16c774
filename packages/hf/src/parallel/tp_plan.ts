// Tensor-parallel plans: which layers of a model are split over the mesh dim named 'tp', as
// data in each model's folder (transformers' `base_model_tp_plan`, PyTorch's parallelize_module),
// so the model code stays single-device code. parallelize (parallelize.ts) applies a model's plan
// to its plain layers: on a mesh with a 'tp' dim each listed layer is replaced by its parallel
// form (the same parameters, split); on any other mesh nothing changes.
//   'colwise'  Linear: output features split (weight and bias S(0)); the output stays sharded
//              on its last dim. Embedding: the embedding dim split; the output stays sharded.
//   'rowwise'  Linear: input features split (weight S(1)), partial sums all-reduced, so the
//              output is replicated. A colwise layer followed by a rowwise one needs one
//              all-reduce (Megatron): attention q/k/v then out, an MLP's up then down.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { checkDivides } from './mesh_dims.js';
import { entryFor } from './module_paths.js';

/**
 * How a layer splits over 'tp': 'colwise' splits a Linear's output features (an Embedding's
 * embedding dim), its output left sharded; 'rowwise' a Linear's input features, its partial sums
 * all-reduced. A colwise layer followed by a rowwise one costs one all-reduce.
 */
export type TpStyle = 'colwise' | 'rowwise';

/** Module path patterns ('*' matches one path part, e.g. 'encoder.block.*.layer.0.SelfAttention.q') to styles. */
export type TpPlan = Readonly<Record<string, TpStyle>>;

/** A function that makes the parallel form of `layer` for `style`, or undefined when it has that form already; throws when it has none. */
function parallelForm(layer: nn.Module, style: TpStyle, path: string): (() => nn.Module) | undefined {
  if (layer instanceof nn.Linear && (style === 'colwise' || style === 'rowwise')) {
    const Parallel = style === 'colwise' ? nn.ColumnParallelLinear : nn.RowParallelLinearWithReplicateOutput;
    if (layer.constructor === Parallel) return undefined;
    const { mesh, dtype } = layer.weight;
    const options = { mesh, dtype, bias: layer.bias !== undefined };
    return () => withValuesOf(layer, nn.skipInit(() => new Parallel(layer.inFeatures, layer.outFeatures, options)));
  }
  if (layer instanceof nn.Embedding && style === 'colwise') {
    if (layer.constructor === nn.ColumnParallelEmbedding) return undefined;
    const { mesh, dtype } = layer.weight;
    return () => withValuesOf(layer, nn.skipInit(() => new nn.ColumnParallelEmbedding(layer.numEmbeddings, layer.embeddingDim, { mesh, dtype })));
  }
  throw new DTorchError(ErrorCode.InvalidArgument, `tp plan: "${path}" is a ${layer.constructor.name}, which has no ${JSON.stringify(style)} form; a plan splits Linear layers ('colwise' or 'rowwise') and Embedding layers ('colwise')`);
}

// Outside skipInit the plain layer's initial values carry over, split as the parallel layer
// wants them; inside skipInit there are none to carry (the weights are loaded next).
function withValuesOf(plain: nn.Module, parallel: nn.Module): nn.Module {
  if (!nn.initSkipped()) {
    const values = new Map([...plain.namedParameters()]);
    for (const [key, p] of parallel.namedParameters()) parallel.setTensor(key, values.get(key)!.redistribute(p.placements));
  }
  plain.dispose();
  return parallel;
}

/**
 * Replaces every layer of `model` that `plan` names by its parallel form when `mesh` has a 'tp'
 * dim; layers in that form already stay as they are. A layer without the form its style asks
 * for is an error, before any layer is replaced.
 */
export function applyTpPlan(model: nn.Module, mesh: dt.DeviceMesh, plan: TpPlan): void {
  if (nn.tpDim(mesh) < 0) return;
  const replacements: [string, () => nn.Module][] = [];
  for (const [path, layer] of model.namedModules()) {
    const style = entryFor(plan, path);
    if (style && path === '') throw new DTorchError(ErrorCode.InvalidArgument, `tp plan: '' names the model itself, which cannot be replaced; name its layers`);
    const make = style && parallelForm(layer, style, path);
    if (make) replacements.push([path, make]);
  }
  for (const [path, make] of replacements) {
    const at = path.lastIndexOf('.');
    const parent = at < 0 ? model : model.getSubmodule(path.slice(0, at));
    (parent as unknown as Record<string, nn.Module>)[path.slice(at + 1)] = make();
  }
}

/** A TP error when `count` (heads, say) cannot be split evenly over the mesh's 'tp' dim. */
export function checkTpDivides(mesh: dt.DeviceMesh, model: string, what: string, count: number): void {
  checkDivides(mesh, 'tp', model, what, count);
}
