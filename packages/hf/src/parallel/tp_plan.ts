// Tensor-parallel plans: which layers of a model are split over the mesh dim named 'tp', as
// data beside the model (transformers' `base_model_tp_plan`, PyTorch's parallelize_module), so
// the model code stays single-device code. A model builds its plain layers, then applies its
// plan: on a mesh with a 'tp' dim each listed layer is replaced by its parallel form (the same
// parameters, split); on any other mesh nothing changes.
//   'colwise'  Linear: output features split (weight and bias S(0)); the output stays sharded
//              on its last dim. Embedding: the embedding dim split; the output stays sharded.
//   'rowwise'  Linear: input features split (weight S(1)), partial sums all-reduced, so the
//              output is replicated. A colwise layer followed by a rowwise one needs one
//              all-reduce (Megatron): attention q/k/v then out, an MLP's up then down.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode } from '@dtorch/common';

/**
 * How a layer splits over 'tp': 'colwise' splits a Linear's output features (an Embedding's
 * embedding dim), its output left sharded; 'rowwise' a Linear's input features, its partial sums
 * all-reduced. A colwise layer followed by a rowwise one costs one all-reduce.
 */
export type TpStyle = 'colwise' | 'rowwise';

/** Module path patterns ('*' matches one path part, e.g. 'encoder.block.*.layer.0.SelfAttention.q') to styles. */
export type TpPlan = Readonly<Record<string, TpStyle>>;

const matches = (pattern: string, path: string) => {
  const [p, q] = [pattern.split('.'), path.split('.')];
  return p.length === q.length && p.every((part, i) => part === '*' || part === q[i]);
};

/** The parallel form of `layer` for `style`, with the same (or no: under skipInit) parameter values. */
function parallelForm(layer: nn.Module, style: TpStyle, path: string): nn.Module {
  if (layer instanceof nn.Linear) {
    const { mesh, dtype } = layer.weight;
    const options = { mesh, dtype, bias: layer.bias !== undefined };
    const Parallel = style === 'colwise' ? nn.ColumnParallelLinear : nn.RowParallelLinearWithReplicateOutput;
    return withValuesOf(layer, nn.skipInit(() => new Parallel(layer.inFeatures, layer.outFeatures, options)));
  }
  if (layer instanceof nn.Embedding && style === 'colwise') {
    const { mesh, dtype } = layer.weight;
    return withValuesOf(layer, nn.skipInit(() => new nn.ColumnParallelEmbedding(layer.numEmbeddings, layer.embeddingDim, { mesh, dtype })));
  }
  throw new DTorchError(ErrorCode.Internal, `tp plan: no '${style}' form of ${layer.constructor.name} at "${path}"`);
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

/** Replaces every layer of `model` that `plan` names by its parallel form when `mesh` has a 'tp' dim. */
export function applyTpPlan(model: nn.Module, mesh: dt.DeviceMesh, plan: TpPlan): void {
  if (nn.tpDim(mesh) < 0) return;
  for (const [path, layer] of [...model.namedModules()]) {
    const style = Object.entries(plan).find(([pattern]) => matches(pattern, path))?.[1];
    if (!style) continue;
    const at = path.lastIndexOf('.');
    const parent = at < 0 ? model : model.getSubmodule(path.slice(0, at));
    (parent as unknown as Record<string, nn.Module>)[path.slice(at + 1)] = parallelForm(layer, style, path);
  }
}

/** A TP error when `count` (heads, say) cannot be split evenly over the mesh's 'tp' dim. */
export function checkTpDivides(mesh: dt.DeviceMesh, model: string, what: string, count: number): void {
  const tp = nn.tpDim(mesh);
  if (tp < 0) return;
  const size = mesh.shape[tp]!;
  if (count % size !== 0) {
    throw new DTorchError(ErrorCode.InvalidMesh, `${model}: ${what} ${count} cannot be split over the mesh dim 'tp' of size ${size}; use a tp size that divides ${count}`);
  }
}
