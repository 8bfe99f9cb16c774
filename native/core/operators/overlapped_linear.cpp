// Linears with their tensor-parallel collective inside (Megatron sequence parallelism with the
// communication hidden, as PyTorch's fused_all_gather_matmul / fused_matmul_reduce_scatter):
//   all_gather_linear      y_i = linear(all_gather(x), W_i, b_i) for several weights. Each
//                          rank's own token chunk is multiplied at once while the peers' chunks
//                          are pulled, then theirs as they land;
//   linear_reduce_scatter  sum_j linear(x_j, W_j) + b, reduce-scattered on a token dim. The
//                          rows the peers need are multiplied first and pulled while this rank
//                          multiplies its own.
// On GPUs the pulls use the copy engines, so they run beside the matmuls (an NCCL kernel would
// wait for the SMs the matmuls hold). Same values as the redistribute-then-linear sequence.
// Attributes: all_gather_linear      meshDim, nWeights, hasBias per weight (+ derived: token dim)
//             linear_reduce_scatter  meshDim, scatterDim, nPairs, hasBias
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/communication/group_call.h"
#include "core/operand/layout.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {

// One rendezvous per group of ranks along the mesh dim of the collective.
struct OverlappedLinearState final : OpState {
  int meshDim = 0;
  std::vector<std::shared_ptr<Rendezvous>> meet;  // [group]

  void abandon(const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const override {
    meet[groupIndexAlong(mesh, rank, meshDim)]->abandon(error);
  }
};

namespace {

using common::code::kDtypeMismatch;
using common::code::kInvalidArgument;
using common::code::kPlacementMismatch;
using common::code::kShapeMismatch;

int meshDimAttr(const InferContext& ctx, const DeviceMesh& mesh) {
  const int64_t m = ctx.intAttr(0);
  if (m < 0 || m >= mesh.ndim()) ctx.fail(kInvalidArgument, "mesh dim " + std::to_string(m) + " is not a dim of a " + std::to_string(mesh.ndim()) + "-D mesh");
  return static_cast<int>(m);
}

std::shared_ptr<OverlappedLinearState> stateFor(const DeviceMesh& mesh, int meshDim) {
  auto state = std::make_shared<OverlappedLinearState>();
  state->meshDim = meshDim;
  state->meet = rendezvousPerGroup(mesh, meshDim);
  return state;
}

// Off the collective's mesh dim, activations may be Replicate or sharded on a leading dim other
// than `tokenDim` (e.g. a data-parallel batch).
void checkOtherMeshDims(const InferContext& ctx, int meshDim, const TensorMeta& x, int64_t tokenDim, const char* what) {
  const int64_t last = x.ndim() - 1;
  for (int d = 0; d < static_cast<int>(x.placements.size()); ++d) {
    if (d == meshDim) continue;
    const Placement& p = x.placements[d];
    if (!(p.isReplicate() || (p.isShard() && p.dim != tokenDim && p.dim != last))) {
      ctx.fail(kPlacementMismatch, std::string(what) + " is " + formatPlacements(x.placements) + "; on mesh dim " + std::to_string(d) +
                                       " it must be R or S(d) of a leading dim other than " + std::to_string(tokenDim) +
                                       " (redistribute it there first)");
    }
  }
}

// Weights and biases must be Replicate off the collective's mesh dim.
void checkReplicatedOff(const InferContext& ctx, int meshDim, const TensorMeta& t, const std::string& what) {
  for (int d = 0; d < static_cast<int>(t.placements.size()); ++d) {
    if (d != meshDim && !t.placements[d].isReplicate()) {
      ctx.fail(kPlacementMismatch, what + " is " + formatPlacements(t.placements) + "; off mesh dim " + std::to_string(meshDim) +
                                       " weights and biases must be R (redistribute it with R there)");
    }
  }
}

void checkDtype(const InferContext& ctx, const TensorMeta& t, DType dtype, const std::string& what) {
  if (t.dtype != dtype) {
    ctx.fail(kDtypeMismatch, what + " is " + std::string(dtypeName(t.dtype)) + " but x is " + std::string(dtypeName(dtype)) + "; cast with .to(dtype)");
  }
}

// y = x W^T (+ b) into `out` (same shape as the result): straight into it when it is contiguous.
void linearInto(at::Tensor out, const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, bool accumulate) {
  if (out.numel() == 0) return;
  if (!out.is_contiguous()) {
    at::Tensor y = at::linear(x, w, bias ? std::optional<at::Tensor>(*bias) : std::nullopt);
    if (accumulate) out.add_(y);
    else out.copy_(y);
    return;
  }
  at::Tensor out2 = out.view({-1, out.size(-1)});
  const at::Tensor x2 = x.reshape({-1, x.size(-1)});
  if (accumulate) at::addmm_out(out2, out2, x2, w.t());
  else if (bias) at::addmm_out(out2, *bias, x2, w.t());
  else at::mm_out(out2, x2, w.t());
}

// ---- all_gather_linear(x, W_1..W_k, biases...) ----------------------------------------------

// x sharded on a token dim g along the mesh dim; each W_i [N_i, K] column parallel (S(0)) or R
// there, its bias alike; output i: x's shape with N_i last, S(-1) where W_i is S(0).
void inferAllGatherLinear(const InferContext& ctx, Outputs& out) {
  const TensorMeta& x = *ctx.inputs[0];
  const DeviceMesh& mesh = ctx.meshes.get(x.meshId);
  const int m = meshDimAttr(ctx, mesh);
  const int64_t k = ctx.intAttr(1), last = x.ndim() - 1;
  int64_t biases = 0;
  for (int64_t i = 0; i < k; ++i) biases += ctx.intAttr(2 + i) != 0;
  if (k < 1 || static_cast<int64_t>(ctx.inputs.size()) != 1 + k + biases) ctx.fail(kInvalidArgument, "takes x, then weights, then their biases");
  if (x.ndim() < 2) ctx.fail(kShapeMismatch, "x of shape " + formatShape(x.shape) + " needs a token dim and a feature dim");
  const Placement& xp = x.placements[m];
  if (!xp.isShard() || xp.dim == last) {
    ctx.fail(kPlacementMismatch, "x is " + formatPlacements(x.placements) + "; along mesh dim " + std::to_string(m) +
                                     " it must be sharded on a token dim, e.g. S(" + std::to_string(std::max<int64_t>(0, last - 1)) +
                                     ") (sequence parallel); for a replicated x use linear");
  }
  const int64_t g = xp.dim;
  checkOtherMeshDims(ctx, m, x, g, "x");
  size_t b = 1 + static_cast<size_t>(k);
  for (int64_t i = 0; i < k; ++i) {
    const TensorMeta& w = *ctx.inputs[1 + i];
    const std::string wName = "weight #" + std::to_string(i);
    if (w.ndim() != 2 || w.shape[1] != x.shape[last]) {
      ctx.fail(kShapeMismatch, wName + " of shape " + formatShape(w.shape) + " does not fit x of shape " + formatShape(x.shape) +
                                   ": weights must be [out, " + std::to_string(x.shape[last]) + "]");
    }
    checkDtype(ctx, w, x.dtype, wName);
    const Placement& wp = w.placements[m];
    if (!(wp.isReplicate() || (wp.isShard() && wp.dim == 0))) {
      ctx.fail(kPlacementMismatch, wName + " is " + formatPlacements(w.placements) + "; along mesh dim " + std::to_string(m) +
                                       " it must be S(0) (column parallel) or R");
    }
    checkReplicatedOff(ctx, m, w, wName);
    if (ctx.intAttr(2 + i) != 0) {
      const TensorMeta& bias = *ctx.inputs[b++];
      const std::string bName = "bias #" + std::to_string(i);
      if (bias.ndim() != 1 || bias.shape[0] != w.shape[0]) ctx.fail(kShapeMismatch, bName + " of shape " + formatShape(bias.shape) + " must be [" + std::to_string(w.shape[0]) + "]");
      checkDtype(ctx, bias, x.dtype, bName);
      if (!(bias.placements[m] == wp)) {
        ctx.fail(kPlacementMismatch, bName + " is " + formatPlacements(bias.placements) + " but its weight is " + wp.shortName() + " along mesh dim " +
                                         std::to_string(m) + "; place them alike");
      }
      checkReplicatedOff(ctx, m, bias, bName);
    }
    TensorMeta y = x;
    y.shape.back() = w.shape[0];
    y.placements[m] = wp.isShard() ? Placement::shard(static_cast<int32_t>(last)) : Placement::replicate();
    out.push_back(std::move(y));
  }
  ctx.derived.push_back(static_cast<double>(g));
  ctx.state = stateFor(mesh, m);
}

void runAllGatherLinear(KernelContext& ctx) {
  const auto& state = static_cast<const OverlappedLinearState&>(*ctx.node.state);
  const int64_t k = ctx.intAttr(1), g = ctx.intAttr(2 + k);
  const at::Tensor& x = ctx.input(0);
  std::vector<const at::Tensor*> biases(static_cast<size_t>(k), nullptr);
  size_t b = 1 + static_cast<size_t>(k);
  for (int64_t i = 0; i < k; ++i) {
    if (ctx.intAttr(2 + i) != 0) biases[i] = &ctx.input(b++);
  }
  std::vector<at::Tensor> outs;
  for (int64_t i = 0; i < k; ++i) outs.push_back(at::empty(ctx.outputPiece(i).shape, x.options()));
  const int64_t tokens = outs[0].size(g);  // x is sharded on g along the mesh dim only
  const std::unique_ptr<GroupCall> call = openGroupCall(ctx.mesh, ctx.rank, state.meshDim, *state.meet[groupIndexAlong(ctx.mesh, ctx.rank, state.meshDim)]);
  const int n = call->groupSize();
  call->allGatherEach(x, g, tokens, [&](int p, const at::Tensor& piece) {
    for (int64_t i = 0; i < k; ++i) {
      linearInto(outs[i].narrow(g, chunkOffset(tokens, n, p), piece.size(g)), piece, ctx.input(1 + i), biases[i], /*accumulate=*/false);
    }
  });
  for (at::Tensor& y : outs) ctx.outputs.push_back(std::move(y));
}

// ---- linear_reduce_scatter(x_1..x_k, W_1..W_k, bias?) -----------------------------------------

// Row parallel: each x_j [..., K_j] sharded on its features (S(-1)) along the mesh dim, W_j
// [N, K_j] on its inputs (S(1)); the bias [N] Replicate. Output: x's shape with N last, S(scatterDim)
// along the mesh dim.
void inferLinearReduceScatter(const InferContext& ctx, Outputs& out) {
  const TensorMeta& x0 = *ctx.inputs[0];
  const DeviceMesh& mesh = ctx.meshes.get(x0.meshId);
  const int m = meshDimAttr(ctx, mesh);
  const int64_t k = ctx.intAttr(2), last = x0.ndim() - 1;
  const bool hasBias = ctx.intAttr(3) != 0;
  if (k < 1 || static_cast<int64_t>(ctx.inputs.size()) != 2 * k + (hasBias ? 1 : 0)) {
    ctx.fail(kInvalidArgument, "takes the inputs, then one weight per input, then an optional bias");
  }
  if (x0.ndim() < 2) ctx.fail(kShapeMismatch, "input #0 of shape " + formatShape(x0.shape) + " needs a token dim and a feature dim");
  const int64_t s = normalizeDim(ctx, ctx.intAttr(1), x0.ndim());
  if (s == last) ctx.fail(kInvalidArgument, "scatter dim " + std::to_string(s) + " is the feature dim; scatter a token dim (e.g. " + std::to_string(std::max<int64_t>(0, last - 1)) + ")");
  const TensorMeta& w0 = *ctx.inputs[k];
  for (int64_t j = 0; j < k; ++j) {
    const TensorMeta &x = *ctx.inputs[j], &w = *ctx.inputs[k + j];
    const std::string xName = "input #" + std::to_string(j), wName = "weight #" + std::to_string(j);
    if (x.ndim() != x0.ndim() || !std::equal(x.shape.begin(), x.shape.end() - 1, x0.shape.begin())) {
      ctx.fail(kShapeMismatch, xName + " of shape " + formatShape(x.shape) + " must share input #0's leading dims " + formatShape(x0.shape));
    }
    if (w.ndim() != 2 || w.shape[1] != x.shape[last] || w.shape[0] != w0.shape[0]) {
      ctx.fail(kShapeMismatch, wName + " of shape " + formatShape(w.shape) + " does not fit " + xName + " of shape " + formatShape(x.shape) +
                                   ": weights must be [out, in] with in = the input's last dim and one out for all");
    }
    checkDtype(ctx, x, x0.dtype, xName);
    checkDtype(ctx, w, x0.dtype, wName);
    if (!(x.placements[m] == Placement::shard(static_cast<int32_t>(last))) || !(w.placements[m] == Placement::shard(1))) {
      ctx.fail(kPlacementMismatch, xName + " is " + formatPlacements(x.placements) + " and " + wName + " " + formatPlacements(w.placements) +
                                       "; along mesh dim " + std::to_string(m) + " inputs must be S(" + std::to_string(last) +
                                       ") and weights S(1) (row parallel)");
    }
    for (int d = 0; d < mesh.ndim(); ++d) {
      if (d != m && !(x.placements[d] == x0.placements[d])) {
        ctx.fail(kPlacementMismatch, xName + " is " + formatPlacements(x.placements) + " but input #0 " + formatPlacements(x0.placements) + "; place the inputs alike");
      }
    }
    checkReplicatedOff(ctx, m, w, wName);
  }
  checkOtherMeshDims(ctx, m, x0, s, "input #0");
  if (hasBias) {
    const TensorMeta& bias = *ctx.inputs[2 * k];
    if (bias.ndim() != 1 || bias.shape[0] != w0.shape[0]) ctx.fail(kShapeMismatch, "bias of shape " + formatShape(bias.shape) + " must be [" + std::to_string(w0.shape[0]) + "]");
    checkDtype(ctx, bias, x0.dtype, "bias");
    if (!allReplicate(bias.placements)) ctx.fail(kPlacementMismatch, "bias is " + formatPlacements(bias.placements) + "; it must be R on every mesh dim (it is added once, after the sum)");
  }
  TensorMeta y = x0;
  y.shape.back() = w0.shape[0];
  y.placements[m] = Placement::shard(static_cast<int32_t>(s));
  out.push_back(std::move(y));
  ctx.state = stateFor(mesh, m);
}

void runLinearReduceScatter(KernelContext& ctx) {
  const auto& state = static_cast<const OverlappedLinearState&>(*ctx.node.state);
  const int64_t k = ctx.intAttr(2);
  const at::Tensor& x0 = ctx.input(0);
  const int64_t s = ctx.intAttr(1) < 0 ? ctx.intAttr(1) + x0.dim() : ctx.intAttr(1);
  std::vector<int64_t> shape(x0.sizes().begin(), x0.sizes().end());
  shape.back() = ctx.input(k).size(0);
  const int64_t tokens = shape[s];
  const std::unique_ptr<GroupCall> call = openGroupCall(ctx.mesh, ctx.rank, state.meshDim, *state.meet[groupIndexAlong(ctx.mesh, ctx.rank, state.meshDim)]);
  const int n = call->groupSize(), position = call->groupPosition();
  const at::Tensor* bias = ctx.intAttr(3) != 0 ? &ctx.input(2 * k) : nullptr;
  at::Tensor y = call->reduceScatterFilled(shape, x0.options(), s, [&](int p, const at::Tensor& rows) {
    const int64_t offset = chunkOffset(tokens, n, p);
    for (int64_t j = 0; j < k; ++j) {
      // the bias goes into this rank's own rows only, so the sum holds it once
      linearInto(rows, ctx.input(j).narrow(s, offset, rows.size(s)), ctx.input(k + j), j == 0 && p == position ? bias : nullptr, /*accumulate=*/j > 0);
    }
  });
  ctx.outputs.push_back(std::move(y));
}

}  // namespace

void registerOverlappedLinearOps(OpRegistry& registry) {
  registry.add({"all_gather_linear", -1, "meshDim, nWeights, hasBias per weight", inferAllGatherLinear, runAllGatherLinear});
  registry.add({"linear_reduce_scatter", -1, "meshDim, scatterDim, nPairs, hasBias", inferLinearReduceScatter, runLinearReduceScatter});
}

}  // namespace dtorch::core
