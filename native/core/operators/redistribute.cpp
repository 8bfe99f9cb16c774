// Data movement between placements and meshes:
//   redistribute  same mesh, new placements: the planned steps (communication/redistribute_plan)
//                 run on every rank, collectives through GroupCall;
//   transfer      an all-Replicate tensor to another mesh: input rank 0 sends, every output
//                 rank receives a copy (the recorder composes cross-mesh redistributes from it);
//   to_local      one rank's piece as a tensor of its own on that rank's device.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/communication/group_call.h"
#include "core/communication/redistribute_plan.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/redistribute.h"
#include "core/operators/registry.h"

namespace dtorch::core {

// The plan of one redistribute node and a rendezvous for every group of every collective step.
struct RedistributeState final : OpState {
  std::vector<RedistributeStep> steps;
  std::vector<std::vector<std::shared_ptr<Rendezvous>>> meet;  // [step][group]

  void abandon(const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const override {
    abandonFrom(0, mesh, rank, error);
  }
  void abandonFrom(size_t first, const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const {
    for (size_t s = first; s < steps.size(); ++s) {
      if (steps[s].isCollective()) meet[s][groupIndexAlong(mesh, rank, steps[s].meshDim)]->abandon(error);
    }
  }
};

struct TransferState final : OpState {
  explicit TransferState(int receivers) : box(std::make_shared<Mailbox>(receivers)) {}
  std::shared_ptr<Mailbox> box;
};

namespace {

Placements decodePlacements(const InferContext& ctx, size_t at) {
  Placements out;
  const int64_t n = ctx.intAttr(at);
  for (int64_t i = 0; i < n; ++i) out.push_back(Placement::decode(static_cast<int32_t>(ctx.intAttr(at + 1 + i))));
  return out;
}

// ---- redistribute: attrs nPlacements, placements... -------------------------------------------

void inferRedistribute(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const DeviceMesh& mesh = ctx.meshes.get(in.meshId);
  TensorMeta meta = in;
  meta.placements = decodePlacements(ctx, 0);
  checkPlacements(ctx, meta.placements, mesh, meta.ndim());
  auto state = std::make_shared<RedistributeState>();
  state->steps = planRedistribute(mesh, in.placements, meta.placements);
  for (const RedistributeStep& step : state->steps) {
    auto& groups = state->meet.emplace_back();
    if (!step.isCollective()) continue;
    const int groupSize = static_cast<int>(mesh.shape[step.meshDim]);
    for (int g = 0; g < mesh.size() / groupSize; ++g) groups.push_back(std::make_shared<Rendezvous>(groupSize));
  }
  ctx.state = std::move(state);
  out.push_back(std::move(meta));
}

at::Tensor runStep(const KernelContext& ctx, const RedistributeState& state, size_t s, const at::Tensor& x) {
  const RedistributeStep& step = state.steps[s];
  const DeviceMesh& mesh = ctx.mesh;
  int position = 0;
  groupAlong(mesh, ctx.rank, step.meshDim, &position);
  const int64_t parts = mesh.shape[step.meshDim];
  switch (step.kind) {
    case RedistributeStep::Kind::kLocalSlice: {
      const int64_t size = x.size(step.to);
      return x.narrow(step.to, chunkOffset(size, parts, position), chunkSize(size, parts, position)).clone();
    }
    case RedistributeStep::Kind::kLocalPartial:
      return step.reduce == ReduceOp::kSum && position != 0 ? at::zeros_like(x) : x;
    case RedistributeStep::Kind::kLocalPad: {
      Placements level = step.before;
      level[step.meshDim] = Placement::replicate();
      const int64_t size = localPiece(ctx.node.outputMetas[0].shape, level, mesh, ctx.rank).shape[step.from];
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      shape[step.from] = size;
      at::Tensor out = at::zeros(shape, x.options());
      out.narrow(step.from, chunkOffset(size, parts, position), x.size(step.from)).copy_(x);
      return out;
    }
    default: break;
  }
  Rendezvous& meet = *state.meet[s][groupIndexAlong(mesh, ctx.rank, step.meshDim)];
  SharedMemoryCall call(meet, position, ctx.device, collectiveTimeout());
  switch (step.kind) {
    case RedistributeStep::Kind::kAllGather: return call.allGather(x, step.from);
    case RedistributeStep::Kind::kAllReduce: return call.allReduce(x, step.reduce);
    case RedistributeStep::Kind::kReduceScatter: return call.reduceScatter(x, step.reduce, step.to);
    case RedistributeStep::Kind::kAllToAll: return call.allToAll(x, step.to, step.from);
    default: common::fail(common::code::kInternal, "unknown redistribute step");
  }
}

void runRedistribute(KernelContext& ctx) {
  const auto& state = static_cast<const RedistributeState&>(*ctx.node.state);
  at::Tensor x = ctx.input(0);
  for (size_t s = 0; s < state.steps.size(); ++s) {
    try {
      x = runStep(ctx, state, s, x);
    } catch (const std::exception& e) {
      // the groups of the remaining steps must not wait for this rank
      auto error = std::make_shared<KernelError>(KernelError{"redistribute", e.what(), ctx.node.seq});
      state.abandonFrom(state.steps[s].isCollective() ? s + 1 : s, ctx.mesh, ctx.rank, error);
      throw;
    }
  }
  ctx.outputs.push_back(x.is_same(ctx.input(0)) ? x : x.contiguous());
}

// ---- transfer: attrs targetMeshId -----------------------------------------------------------

void inferTransfer(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  for (const Placement& p : in.placements) {
    if (!p.isReplicate()) ctx.fail(common::code::kInternal, "transfer needs a Replicate input");
  }
  TensorMeta meta = in;
  meta.meshId = static_cast<int>(ctx.intAttr(0));
  const DeviceMesh& target = ctx.meshes.get(meta.meshId);
  meta.placements = Placements(target.ndim(), Placement::replicate());
  ctx.state = std::make_shared<TransferState>(target.size());
  out.push_back(std::move(meta));
}

void runTransfer(KernelContext& ctx) {
  const auto& state = static_cast<const TransferState&>(*ctx.node.state);
  const Contribution sent = state.box->take(collectiveTimeout());
  const at::Tensor here = sent.readable(ctx.device);
  ctx.outputs.push_back(here.is_same(sent.tensor) ? here.clone() : here);  // each rank owns its copy
  finishReads(sent);
}

// ---- to_local: attrs rank, targetMeshId (a 1-device mesh of that rank's device) ---------------

void inferToLocal(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const DeviceMesh& mesh = ctx.meshes.get(in.meshId);
  const int64_t rank = ctx.intAttr(0);
  if (rank < 0 || rank >= mesh.size()) {
    ctx.fail(common::code::kInvalidArgument, "rank " + std::to_string(rank) + " is not on a mesh of " +
                                                 std::to_string(mesh.size()) + " devices");
  }
  TensorMeta meta = in;
  meta.shape = localShape(in, mesh, static_cast<int>(rank));
  meta.meshId = static_cast<int>(ctx.intAttr(1));
  const DeviceMesh& target = ctx.meshes.get(meta.meshId);
  if (target.size() != 1 || !(target.device(0) == mesh.device(static_cast<int>(rank)))) {
    ctx.fail(common::code::kInternal, "to_local needs the 1-device mesh of the rank's device");
  }
  meta.placements = Placements(target.ndim(), Placement::replicate());
  out.push_back(std::move(meta));
}

void runToLocal(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0)); }

}  // namespace

void registerRedistributeOps(OpRegistry& registry) {
  registry.add({"redistribute", 1, "nPlacements, placements...", inferRedistribute, runRedistribute});
  OpDef transfer{"transfer", 1, "targetMeshId", inferTransfer, runTransfer};
  transfer.receivesFromInputMesh = true;
  registry.add(transfer);
  registry.add({"to_local", 1, "rank, targetMeshId", inferToLocal, runToLocal});
}

// kSend: input rank 0 of a transfer hands its tensor (or its failure) to the receivers.
void sendTransfer(const Node& node, const at::Tensor* tensor, std::shared_ptr<const KernelError> error) {
  const auto& state = static_cast<const TransferState&>(*node.state);
  state.box->put(tensor ? *tensor : at::Tensor(), std::move(error));
}

}  // namespace dtorch::core
