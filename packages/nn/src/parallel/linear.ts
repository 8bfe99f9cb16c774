// Tensor-parallel linears (names from the original DTorch), acting on the mesh dim named 'tp':
//   ColumnParallelLinear                          W S(0), b S(0); x R      -> y S(last)
//   ColumnParallelLinearWithReplicateInputOutput  the same, then y all-gathered to R
//   RowParallelLinear                             W S(1), b R;    x S(last) -> y P (b added once)
//   RowParallelLinearWithReplicateOutput          the same, y all-reduced to R, then + b
//   RowParallelLinearWithSequenceParallelOutput   the same, y reduce-scattered on the token dim
//   ReplicateParallelLinear                       W R,    b R;    x R      -> y R
// A column linear followed by a row linear (attention q/k/v then out, or an MLP) needs one
// all-reduce. Sequence parallel (Megatron-SP): a column linear given x sharded on a token dim
// gathers it inside the matmul (dt.F.allGatherLinear), and the row linear's output comes back
// sharded on tokens (dt.F.linearReduceScatter): the norms and residuals between them run on
// 1/tp of the tokens, and the communication hides behind the matmuls. Inputs are redistributed on
// the tp dim when they lie otherwise.
import * as dt from '@dtorch/api';
import { Linear, linearProduct, rowAmax, type LinearLayout } from '../layers/linear.js';
import { onTpDim, toTp, tpDim } from './tp_dim.js';

/**
 * A Linear split on its output features over the mesh's 'tp' dim (Megatron's column-parallel
 * linear): weight [out, in] Shard(0), bias [out] Shard(0). Each rank computes its out / tp
 * output columns; the output stays sharded on its last dim, for a RowParallelLinear next.
 */
export class ColumnParallelLinear extends Linear {
  protected override layout(mesh: dt.DeviceMesh): LinearLayout {
    return { weight: onTpDim(mesh, dt.Shard(0)), bias: onTpDim(mesh, dt.Shard(0)) };
  }

  /**
   * x [..., in] -> y [..., out], Shard(last) on 'tp'. An x sharded on 'tp' along a token dim
   * (sequence parallel) is all-gathered inside the matmul; any other x is replicated on 'tp' first.
   */
  override forward(x: dt.Tensor): dt.Tensor {
    const tp = tpDim(x.mesh);
    const p = tp >= 0 ? x.placements[tp]! : undefined;
    if (p?.isShard() && !p.isShard(x.ndim - 1) && !this.weight_scale) {
      // sequence parallel: all tokens reach the matmul, gathered while it runs (FP8 weights: gathered first)
      return dt.F.allGatherLinear(x, [this.weight], [this.bias], { meshDim: tp })[0]!;
    }
    return linearProduct(this, toTp(x, dt.Replicate()), this.bias);
  }
}

/** A ColumnParallelLinear whose output is all-gathered: y is replicated on 'tp'. */
export class ColumnParallelLinearWithReplicateInputOutput extends ColumnParallelLinear {
  /** x [..., in] -> y [..., out], Replicate on 'tp'. */
  override forward(x: dt.Tensor): dt.Tensor {
    return toTp(super.forward(x), dt.Replicate());
  }
}

/**
 * A Linear split on its input features over the mesh's 'tp' dim (Megatron's row-parallel
 * linear): weight [out, in] Shard(1), bias [out] Replicate. Each rank multiplies its in / tp
 * input columns; the output is Partial (sum) on 'tp', reduced where it is next redistributed.
 */
export class RowParallelLinear extends Linear {
  protected override layout(mesh: dt.DeviceMesh): LinearLayout {
    return { weight: onTpDim(mesh, dt.Shard(1)), bias: onTpDim(mesh, dt.Replicate()) };
  }

  /**
   * x [..., in] (resharded to Shard(last) on 'tp' when it lies otherwise) -> y [..., out],
   * Partial (sum) on 'tp'; the bias is held by one rank of each tp group, so the sum adds it once.
   */
  override forward(x: dt.Tensor): dt.Tensor {
    // the bias as Partial: held by one rank of the tp group, so the sum adds it once
    return this.product(toTp(x, dt.Shard(-1)), this.bias && toTp(this.bias, dt.Partial()));
  }

  /** x (split by columns on 'tp') times the rank's columns; FP8 weights quantize x with each whole row's amax. */
  protected product(x: dt.Tensor, bias?: dt.Tensor): dt.Tensor {
    return dt.tidy(() => linearProduct(this, x, bias, this.weight, this.weight_scale && rowAmax([x])));
  }
}

/** A RowParallelLinear whose output is all-reduced: y is replicated on 'tp' (then the bias is added). */
export class RowParallelLinearWithReplicateOutput extends RowParallelLinear {
  /** x [..., in] -> y [..., out], Replicate on 'tp'. */
  override forward(x: dt.Tensor): dt.Tensor {
    const summed = toTp(this.product(toTp(x, dt.Shard(-1))), dt.Replicate());
    return this.bias ? summed.add(this.bias) : summed;
  }
}

/**
 * A RowParallelLinear whose output is reduce-scattered on the token dim (Megatron sequence
 * parallelism): each rank gets the summed y for 1/tp of the tokens.
 */
export class RowParallelLinearWithSequenceParallelOutput extends RowParallelLinear {
  /**
   * x [..., tokens, in] -> y [..., tokens, out], sharded on the tokens dim (ndim - 2) over 'tp'.
   * Without a 'tp' dim it is a plain RowParallelLinear.
   */
  override forward(x: dt.Tensor): dt.Tensor {
    const tp = tpDim(x.mesh);
    if (tp < 0) return super.forward(x);
    if (this.weight_scale) {
      // FP8 weights: the partial sums reduce-scattered after the matmul, then the bias
      const partial = this.product(toTp(x, dt.Shard(-1)));
      const y = partial.redistribute(partial.placements.map((p, d) => (d === tp ? dt.Shard(partial.ndim - 2) : p)));
      return this.bias ? y.add(this.bias) : y;
    }
    // the token dim: the one before the features ([..., tokens, features])
    return dt.F.linearReduceScatter([toTp(x, dt.Shard(-1))], [this.weight], { dim: x.ndim - 2, bias: this.bias, meshDim: tp });
  }
}

/** A Linear whose weight and bias are replicated on 'tp': every rank computes the whole output. */
export class ReplicateParallelLinear extends Linear {
  /** x [..., in] (replicated on 'tp' first) -> y [..., out], Replicate on 'tp'. */
  override forward(x: dt.Tensor): dt.Tensor {
    return linearProduct(this, toTp(x, dt.Replicate()), this.bias);
  }
}
