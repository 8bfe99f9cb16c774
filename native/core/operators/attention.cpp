// Ring attention: q, k, v sharded on the sequence dim along one mesh dim (the ring). Each rank
// keeps its query block; key/value blocks travel rank to rank around the ring (n - 1 passes,
// each rank holding one visiting block at a time, never the whole K/V), and each block's result
// is merged into the running one with log-sum-exp weights (online softmax). Causal masks use
// global positions, so uneven (torch.chunk) blocks are exact; blocks wholly in a query block's
// future are skipped.
// Attributes: ringMeshDim, isCausal, hasScale, scale.
#include <ATen/ATen.h>

#include <cmath>

#include "common/error.h"
#include "core/communication/group_call.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {

// A rendezvous for every pass of every ring (group of ranks along the ring mesh dim).
struct RingState final : OpState {
  int meshDim = 0;
  std::vector<std::vector<std::shared_ptr<Rendezvous>>> passes;  // [pass][group]

  void abandon(const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const override {
    abandonFrom(0, mesh, rank, error);
  }
  void abandonFrom(size_t first, const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const {
    for (size_t s = first; s < passes.size(); ++s) passes[s][groupIndexAlong(mesh, rank, meshDim)]->abandon(error);
  }
};

namespace {

using common::code::kPlacementMismatch;
using common::code::kShapeMismatch;

void inferRing(const InferContext& ctx, Outputs& out) {
  const TensorMeta &q = *ctx.inputs[0], &k = *ctx.inputs[1], &v = *ctx.inputs[2];
  const int64_t n = q.ndim();
  if (n < 2 || k.ndim() != n || v.ndim() != n || q.shape.back() != k.shape.back() || k.shape[n - 2] != v.shape[n - 2] ||
      q.shape[n - 2] != k.shape[n - 2]) {
    ctx.fail(kShapeMismatch, "q " + formatShape(q.shape) + ", k " + formatShape(k.shape) + " and v " + formatShape(v.shape) +
                                 " must be [..., S, E], [..., S, E], [..., S, Ev] with one sequence length");
  }
  if (k.dtype != q.dtype || v.dtype != q.dtype) ctx.fail(common::code::kDtypeMismatch, "q, k and v must share one dtype");
  const DeviceMesh& mesh = ctx.meshes.get(q.meshId);
  const int ring = static_cast<int>(ctx.intAttr(0));
  for (int d = 0; d < mesh.ndim(); ++d) {
    for (const TensorMeta* t : ctx.inputs) {
      const bool seqShard = t->placements[d].isShard() && t->placements[d].dim == n - 2;
      if (seqShard != (d == ring)) {
        ctx.fail(kPlacementMismatch, "q, k and v must be sharded on the sequence dim " + std::to_string(n - 2) +
                                         " along the ring mesh dim " + std::to_string(ring) + " and only there; got " +
                                         formatPlacements(t->placements));
      }
    }
  }
  auto state = std::make_shared<RingState>();
  state->meshDim = ring;
  for (int pass = 0; pass + 1 < mesh.shape[ring]; ++pass) state->passes.push_back(rendezvousPerGroup(mesh, ring));
  ctx.state = std::move(state);
  Shape shape = q.shape;
  shape.back() = v.shape.back();
  out.push_back(outputLike(ctx, std::move(shape), q.dtype));
}

// Batch and head dims shard alike; the sequence dim shards along the ring (checked by infer).
void ringRows(const InferContext& ctx, SignatureRows& rows) {
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    const Placement s = Placement::shard(d);
    rows.push_back(row({s, s, s}, s));
  }
}

// Attention of a query block (global rows from qStart) to a key block (from kStart): the
// block's output and log-sum-exp per row (-inf where no key is visible).
std::pair<at::Tensor, at::Tensor> blockAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                                 bool causal, int64_t qStart, int64_t kStart) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (causal) {
    const at::Tensor qPos = at::arange(qStart, qStart + q.size(-2), at::TensorOptions().dtype(at::kLong)).unsqueeze(-1);
    const at::Tensor kPos = at::arange(kStart, kStart + k.size(-2), at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
    scores.masked_fill_(kPos.gt(qPos), -std::numeric_limits<double>::infinity());
  }
  at::Tensor lse = at::logsumexp(scores, -1, /*keepdim=*/true);
  at::Tensor weights = at::exp(scores - lse).nan_to_num_(0.0);  // rows with no visible key give 0
  return {at::matmul(weights, v), lse};
}

void runRing(KernelContext& ctx) {
  const auto& state = static_cast<const RingState&>(*ctx.node.state);
  const DeviceMesh& mesh = ctx.mesh;
  int position = 0;
  const std::vector<int> group = groupAlong(mesh, ctx.rank, state.meshDim, &position);
  const int size = static_cast<int>(group.size());
  const int groupIndex = groupIndexAlong(mesh, ctx.rank, state.meshDim);
  const at::ScalarType dtype = ctx.input(0).scalar_type();
  const at::Tensor q = ctx.input(0).to(at::kFloat);
  at::Tensor k = ctx.input(1).to(at::kFloat), v = ctx.input(2).to(at::kFloat);
  const bool causal = ctx.attr(1) != 0;
  const double scale = ctx.attr(2) != 0 ? ctx.attr(3) : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // global start of the sequence block held at each ring position (torch.chunk sizes)
  const int64_t seqLen = ctx.node.outputMetas[0].shape[q.dim() - 2];
  auto blockStart = [&](int p) { return chunkOffset(seqLen, size, p); };

  std::vector<int64_t> rowsShape(q.sizes().begin(), q.sizes().end() - 1);
  rowsShape.push_back(1);
  at::Tensor lse = at::full(rowsShape, -std::numeric_limits<double>::infinity(), q.options());
  std::vector<int64_t> outShape(q.sizes().begin(), q.sizes().end() - 1);
  outShape.push_back(v.size(-1));
  at::Tensor out = at::zeros(outShape, q.options());
  int joined = 0;  // passes this rank has taken part in; on failure the rest are abandoned
  try {
  for (int pass = 0; pass < size; ++pass) {
    const int owner = ((position - pass) % size + size) % size;  // whose key/value block is here
    const bool future = causal && blockStart(owner) >= blockStart(position) + q.size(-2);
    if (!future && k.size(-2) > 0 && q.size(-2) > 0) {
      auto [blockOut, blockLse] = blockAttention(q, k, v, scale, causal, blockStart(position), blockStart(owner));
      const at::Tensor merged = at::logaddexp(lse, blockLse);
      const at::Tensor keep = at::exp(lse - merged).nan_to_num_(0.0), take = at::exp(blockLse - merged).nan_to_num_(0.0);
      out = out.mul_(keep).add_(blockOut.mul_(take));
      lse = merged;
    }
    if (pass + 1 == size) break;
    // pass the visiting block on: send to the next position, receive from the previous one
    {
      const int from = ((position - pass - 1) % size + size) % size;
      std::vector<int64_t> kShape = withSize(k.sizes(), k.dim() - 2, chunkSize(seqLen, size, from));
      std::vector<int64_t> vShape = withSize(v.sizes(), v.dim() - 2, chunkSize(seqLen, size, from));
      const int64_t kNumel = c10::multiply_integers(kShape), vNumel = c10::multiply_integers(vShape);
      ++joined;
      const std::unique_ptr<GroupCall> ring = openGroupCall(mesh, ctx.rank, state.meshDim, *state.passes[pass][groupIndex]);
      const at::Tensor received = ring->shift(at::cat({k.flatten(), v.flatten()}), kNumel + vNumel);
      k = received.narrow(0, 0, kNumel).view(kShape);
      v = received.narrow(0, kNumel, vNumel).view(vShape);
    }
  }
  } catch (const std::exception& e) {
    state.abandonFrom(joined, mesh, ctx.rank, std::make_shared<KernelError>(KernelError{"ring_attention", e.what(), ctx.node.seq, kernelErrorCode(e)}));
    throw;
  }
  ctx.outputs.push_back(out.to(dtype));
}

}  // namespace

void registerAttentionOps(OpRegistry& registry) {
  registry.add({"ring_attention", 3, "ringMeshDim, isCausal, hasScale, scale", inferRing, runRing, ringRows});
}

}  // namespace dtorch::core
