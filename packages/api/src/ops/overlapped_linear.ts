// Linears with the tensor-parallel collective inside, so that the communication hides behind
// the matmuls (Megatron sequence parallelism; PyTorch's fused_all_gather_matmul and
// fused_matmul_reduce_scatter). On GPUs the peers' pieces move by the copy engines while the
// matmuls hold the SMs. Each equals the redistribute-then-linear sequence it replaces.
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { checkTensor, recordOp, recordOpOutputs } from '../record.js';
import type { Tensor } from '../tensor.js';

/** Options of {@link allGatherLinear} and {@link linearReduceScatter}. */
export interface OverlappedLinearOptions {
  /** The mesh dim of the collective, by index or name. Default: the one named 'tp', else the
   *  only mesh dim on which the activations are sharded as the op needs. */
  meshDim?: number | string;
}

function tensors(what: string, xs: unknown): Tensor[] {
  if (!Array.isArray(xs) || xs.length === 0) throw invalidParameter(what, 'a non-empty array of Tensors', xs);
  return xs.map((x, i) => checkTensor(`${what}[${i}]`, x));
}

// The collective's mesh dim: given, named 'tp', or the only one where `sharded(dim)` holds.
function collectiveMeshDim(op: string, x: Tensor, given: number | string | undefined, sharded: (d: number) => boolean, needs: string): number {
  const names = x.mesh.dimNames ?? [];
  if (typeof given === 'string') {
    const d = names.indexOf(given);
    if (d < 0)
      throw new DTorchError(ErrorCode.InvalidArgument, `${op}: the mesh has no dim named '${given}' (its dims: ${names.join(', ') || 'unnamed'})`);
    return d;
  }
  if (given !== undefined) {
    if (checkInteger(`${op} meshDim`, given, 0) >= x.mesh.ndim)
      throw new DTorchError(ErrorCode.InvalidArgument, `${op}: meshDim ${given} is not a dim of a ${x.mesh.ndim}-D mesh`);
    return given;
  }
  if (names.includes('tp')) return names.indexOf('tp');
  const candidates = x.placements.map((_, d) => d).filter(sharded);
  if (candidates.length === 1) return candidates[0]!;
  throw new DTorchError(
    ErrorCode.PlacementMismatch,
    `${op}: cannot tell the mesh dim of the collective from ${x.describe()}: ${
      candidates.length === 0 ? 'no' : candidates.length
    } mesh dim(s) where it is ${needs}; pass { meshDim }`
  );
}

/**
 * `weights.map((w, i) => linear(x gathered along its token dim, w, biases[i]))`, the all-gather
 * overlapped with the matmuls: x is sharded on a token dim (Shard(d), d not the last) along the
 * mesh dim; each weight [out, in] is column parallel (Shard(0)) or Replicate there, its bias
 * placed alike. Output i is Shard(-1) along the mesh dim for a column-parallel weight.
 */
export function allGatherLinear(
  x: Tensor,
  weights: readonly Tensor[],
  biases?: readonly (Tensor | undefined)[],
  options?: OverlappedLinearOptions
): Tensor[] {
  checkTensor('allGatherLinear x', x);
  const ws = tensors('allGatherLinear weights', weights);
  const bs = biases ?? [];
  if (!Array.isArray(bs) || bs.length > ws.length)
    throw invalidParameter('allGatherLinear biases', `an array of at most ${ws.length} (Tensor | undefined)`, biases);
  const given = bs.map((b, i) => (b === undefined || b === null ? undefined : checkTensor(`allGatherLinear biases[${i}]`, b)));
  const meshDim = collectiveMeshDim(
    'allGatherLinear',
    x,
    checkKnownOptions<OverlappedLinearOptions>('allGatherLinear options', options, ['meshDim']).meshDim,
    (d) => x.placements[d]!.isShard() && !x.placements[d]!.isShard(x.ndim - 1),
    'sharded on a token dim'
  );
  const present = given.filter((b): b is Tensor => b !== undefined);
  const flags = ws.map((_, i) => (given[i] ? 1 : 0));
  return recordOpOutputs('all_gather_linear', [x, ...ws, ...present], [meshDim, ws.length, ...flags]);
}

/**
 * `sum_j linear(inputs[j], weights[j]) + bias`, reduce-scattered on token dim `dim`, the
 * reduce-scatter overlapped with the matmuls: each input is sharded on its features (Shard(-1))
 * along the mesh dim and its weight [out, in_j] on its inputs (Shard(1), row parallel); the bias
 * is Replicate. The output is Shard(dim) along the mesh dim, as
 * `linear(...).add(...).redistribute(Shard(dim) there)` with the bias added once.
 */
export function linearReduceScatter(
  inputs: readonly Tensor[],
  weights: readonly Tensor[],
  options: OverlappedLinearOptions & { dim: number; bias?: Tensor }
): Tensor {
  const xs = tensors('linearReduceScatter inputs', inputs);
  const ws = tensors('linearReduceScatter weights', weights);
  if (ws.length !== xs.length) {
    throw new DTorchError(ErrorCode.InvalidArgument, `linearReduceScatter: one weight per input, got ${xs.length} inputs and ${ws.length} weights`);
  }
  if (typeof options !== 'object' || options === null) throw invalidParameter('linearReduceScatter options', '{ dim, bias?, meshDim? }', options);
  checkKnownOptions('linearReduceScatter options', options, ['dim', 'bias', 'meshDim']);
  const x = xs[0]!;
  const dim = checkInteger('linearReduceScatter dim', options.dim);
  const bias = options.bias === undefined ? undefined : checkTensor('linearReduceScatter bias', options.bias);
  const meshDim = collectiveMeshDim(
    'linearReduceScatter',
    x,
    options.meshDim,
    (d) => x.placements[d]!.isShard(x.ndim - 1),
    `sharded on its features (S(${x.ndim - 1}))`
  );
  return recordOp('linear_reduce_scatter', [...xs, ...ws, ...(bias ? [bias] : [])], [meshDim, dim, xs.length, bias ? 1 : 0]);
}
