// Data movement between placements and meshes:
//   redistribute  same mesh, new placements: the planned steps (communication/redistribute_plan)
//                 run on every rank, collectives through GroupCall;
//   transfer      an all-Replicate tensor to another mesh: input rank 0 sends, every output
//                 rank receives a copy (the recorder composes cross-mesh redistributes from it);
//   transfer_pieces  a tensor to another mesh of the same shape, its placements kept: every input
//                 rank sends its own piece to the output rank of the same index (nothing is
//                 gathered: a tensor-parallel weight offloaded to the host moves shard by shard);
//   to_local      one rank's piece as a tensor of its own on that rank's device.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/communication/group_call.h"
#include "core/communication/redistribute_plan.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/device_sync.h"

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

// Hands `piece` (or the error that replaced it) to `box`. From a GPU to CPU workers (toHost): the
// sender copies into pinned host memory on its read stream without waiting, and the copy is
// handed over once it is done (a later move back to a GPU copies from pinned memory without
// waiting either).
static void sendTo(const std::shared_ptr<Mailbox>& box, bool toHost, const at::Tensor* piece, std::shared_ptr<const KernelError> error) {
  if (toHost && piece && piece->is_cuda()) {
    external::cuda::copyToHost(*piece, [box](at::Tensor host) { box->put(std::move(host), nullptr); });
    return;
  }
  box->put(piece ? *piece : at::Tensor(), std::move(error));
}

struct TransferState final : OpState {
  TransferState(int receivers, bool toHost) : box(std::make_shared<Mailbox>(receivers)), toHost(toHost), receivers(receivers) {}
  void send(int, const at::Tensor* piece, std::shared_ptr<const KernelError> error) const override { sendTo(box, toHost, piece, std::move(error)); }
  std::shared_ptr<Mailbox> box;
  bool toHost;    // a GPU mesh's tensor onto a CPU mesh
  int receivers;  // the target mesh's ranks
};

// transfer_pieces: input rank r's piece goes to output rank r, through a mailbox of its own; from
// GPUs onto CPU workers through pinned host memory, as TransferState.
struct TransferPiecesState final : OpState {
  TransferPiecesState(int ranks, bool toHost) : toHost(toHost) {
    for (int r = 0; r < ranks; ++r) boxes.push_back(std::make_shared<Mailbox>(1));
  }
  void send(int rank, const at::Tensor* piece, std::shared_ptr<const KernelError> error) const override {
    sendTo(boxes[static_cast<size_t>(rank)], toHost, piece, std::move(error));
  }
  std::vector<std::shared_ptr<Mailbox>> boxes;  // per rank
  bool toHost;                                  // a GPU mesh's pieces onto a CPU mesh
};

// gather: every input rank sends its piece; the one output rank puts the full tensor together.
struct GatherState final : OpState {
  GatherState(const DeviceMesh& source, TensorMeta meta)
      : source(source), meta(std::move(meta)), pieces(std::make_shared<Collection>(source.size())) {}
  void send(int rank, const at::Tensor* piece, std::shared_ptr<const KernelError> error) const override {
    pieces->put(rank, piece ? *piece : at::Tensor(), std::move(error));
  }
  const DeviceMesh& source;  // the input's mesh (meshes live as long as the engine)
  TensorMeta meta;           // the input's meta: where each piece goes
  std::shared_ptr<Collection> pieces;
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
    state->meet.push_back(step.isCollective() ? rendezvousPerGroup(mesh, step.meshDim) : std::vector<std::shared_ptr<Rendezvous>>{});
  }
  ctx.state = std::move(state);
  out.push_back(std::move(meta));
}

// The size of tensor dim `dim` on this rank once the step's mesh dim is gathered: what the
// group's pieces along that mesh dim add up to (nested shards of other mesh dims stay).
int64_t gatheredSize(const KernelContext& ctx, const RedistributeStep& step, int32_t dim) {
  Placements level = step.before;
  level[step.meshDim] = Placement::replicate();
  return localPiece(ctx.node.outputMetas[0].shape, level, ctx.mesh, ctx.rank).shape[dim];
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
      const int64_t size = gatheredSize(ctx, step, step.from);
      at::Tensor out = at::zeros(withSize(x.sizes(), step.from, size), x.options());
      out.narrow(step.from, chunkOffset(size, parts, position), x.size(step.from)).copy_(x);
      return out;
    }
    default: break;
  }
  Rendezvous& meet = *state.meet[s][groupIndexAlong(mesh, ctx.rank, step.meshDim)];
  const std::unique_ptr<GroupCall> call = openGroupCall(mesh, ctx.rank, step.meshDim, meet);
  switch (step.kind) {
    case RedistributeStep::Kind::kAllGather: return call->allGather(x, step.from, gatheredSize(ctx, step, step.from));
    case RedistributeStep::Kind::kAllReduce: return call->allReduce(x, step.reduce);
    case RedistributeStep::Kind::kReduceScatter: return call->reduceScatter(x, step.reduce, step.to);
    case RedistributeStep::Kind::kAllToAll: return call->allToAll(x, step.to, step.from, gatheredSize(ctx, step, step.from));
    default: common::fail(common::code::kInternal, "unknown redistribute step");
  }
}

// On CUDA the steps run on the worker's communication stream, after the work that made the input
// (its marker, or its batch's end), not behind the compute queued since: the compute kernels
// queued after this node and independent of it overlap the steps, and only the output's
// consumers wait (ctx.outputsReady).
void runRedistribute(KernelContext& ctx) {
  const auto& state = static_cast<const RedistributeState&>(*ctx.node.state);
  at::Tensor x = ctx.input(0);
  external::cuda::CommunicationScope onCommunicationStream(x, ctx.inputsBatch, ctx.inputsMade);
  for (size_t s = 0; s < state.steps.size(); ++s) {
    try {
      x = runStep(ctx, state, s, x);
    } catch (const std::exception& e) {
      // the groups of the remaining steps must not wait for this rank
      auto error = std::make_shared<KernelError>(KernelError{"redistribute", e.what(), ctx.node.seq, kernelErrorCode(e)});
      state.abandonFrom(state.steps[s].isCollective() ? s + 1 : s, ctx.mesh, ctx.rank, error);
      throw;
    }
  }
  ctx.outputs.push_back(x.is_same(ctx.input(0)) ? x : x.contiguous());
  ctx.outputsReady = onCommunicationStream.finish();
}

// Puts `meta` on mesh `meshId`, replicated there (what a move to another mesh produces).
const DeviceMesh& replicateOn(const InferContext& ctx, TensorMeta& meta, int64_t meshId) {
  meta.meshId = static_cast<int>(meshId);
  const DeviceMesh& target = ctx.meshes.get(meta.meshId);
  meta.placements = Placements(target.ndim(), Placement::replicate());
  return target;
}

// A piece from host memory onto a GPU: its copy runs on the upload stream (external::cuda::
// UploadScope), overlapping the compute queued before it; the output's consumers wait for it.
bool fromHost(const KernelContext& ctx, const Contribution& sent) { return ctx.device.is_cuda() && sent.tensor.defined() && !sent.tensor.is_cuda(); }

// ---- transfer: attrs targetMeshId -----------------------------------------------------------

void inferTransfer(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  if (!allReplicate(in.placements)) ctx.fail(common::code::kInternal, "transfer needs a Replicate input");
  TensorMeta meta = in;
  const DeviceMesh& source = ctx.meshes.get(in.meshId);
  const DeviceMesh& target = replicateOn(ctx, meta, ctx.intAttr(0));
  ctx.state = std::make_shared<TransferState>(target.size(), source.kind == DeviceKind::kCuda && target.kind == DeviceKind::kCpu);
  out.push_back(std::move(meta));
}

void runTransfer(KernelContext& ctx) {
  const auto& state = static_cast<const TransferState&>(*ctx.node.state);
  const Contribution sent = state.box->take(collectiveTimeout());
  external::cuda::UploadScope onUploadStream(fromHost(ctx, sent));
  const at::Tensor here = sent.readable(ctx.device);
  // each rank owns its copy (the host copy a GPU made for a single CPU receiver is its own already)
  const bool owned = !here.is_same(sent.tensor) || (state.toHost && state.receivers == 1);
  ctx.outputs.push_back(owned ? here : here.clone());
  finishReads(sent);
  ctx.outputsReady = onUploadStream.finish();
}

// ---- transfer_pieces: attrs targetMeshId (a mesh of the input mesh's shape) -------------------

void inferTransferPieces(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const DeviceMesh& source = ctx.meshes.get(in.meshId);
  const DeviceMesh& target = ctx.meshes.get(static_cast<int>(ctx.intAttr(0)));
  if (source.shape != target.shape) ctx.fail(common::code::kInternal, "transfer_pieces needs a target mesh of the input mesh's shape");
  TensorMeta meta = in;
  meta.meshId = target.id;
  ctx.state = std::make_shared<TransferPiecesState>(target.size(), source.kind == DeviceKind::kCuda && target.kind == DeviceKind::kCpu);
  out.push_back(std::move(meta));
}

void runTransferPieces(KernelContext& ctx) {
  const auto& state = static_cast<const TransferPiecesState&>(*ctx.node.state);
  const Contribution sent = state.boxes[static_cast<size_t>(ctx.rank)]->take(collectiveTimeout());
  external::cuda::UploadScope onUploadStream(fromHost(ctx, sent));
  const at::Tensor here = sent.readable(ctx.device);
  // the output owns its piece: a copy onto another device is new (a GPU's into pinned memory too)
  ctx.outputs.push_back(here.is_same(sent.tensor) ? here.clone() : here);
  finishReads(sent);
  ctx.outputsReady = onUploadStream.finish();
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
  const DeviceMesh& target = replicateOn(ctx, meta, ctx.intAttr(1));
  if (target.size() != 1 || !(target.device(0) == mesh.device(static_cast<int>(rank)))) {
    ctx.fail(common::code::kInternal, "to_local needs the 1-device mesh of the rank's device");
  }
  out.push_back(std::move(meta));
}

void runToLocal(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0)); }

// ---- gather: attrs targetMeshId (a 1-device mesh of input rank 0's device) ---------------------
// The full tensor from its pieces, put together on one device: what a read needs, moving each
// piece once (an all-gather would copy the whole tensor to every rank). Pieces land at their
// offsets; Replicate copies are taken once; partial sums add up (averages divide).

void inferGather(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  if (!partialsAdd(in.placements)) ctx.fail(common::code::kInternal, "gather takes sums and averages as partials");
  TensorMeta meta = in;
  replicateOn(ctx, meta, ctx.intAttr(0));
  ctx.state = std::make_shared<GatherState>(ctx.meshes.get(in.meshId), in);
  out.push_back(std::move(meta));
}

void runGather(KernelContext& ctx) {
  const auto& state = static_cast<const GatherState&>(*ctx.node.state);
  const DeviceMesh& mesh = state.source;
  const TensorMeta& m = state.meta;
  const std::vector<Contribution> pieces = state.pieces->takeAll(collectiveTimeout());
  at::Tensor full = at::empty(m.shape, at::TensorOptions().dtype(m.dtype).device(ctx.device));
  int64_t averaged = 1;  // ranks whose parts average
  for (size_t d = 0; d < m.placements.size(); ++d) {
    if (m.placements[d].isPartial() && m.placements[d].reduce == ReduceOp::kAvg) averaged *= mesh.shape[d];
  }
  for (int r = 0; r < mesh.size(); ++r) {
    const std::vector<int64_t> coords = meshCoords(mesh, r);
    bool copy = false;   // a second copy of a Replicate piece
    bool first = true;   // the first part of its region (rank order puts it first): copied, not added
    for (size_t d = 0; d < coords.size(); ++d) {
      copy = copy || (m.placements[d].isReplicate() && coords[d] != 0);
      first = first && !(m.placements[d].isPartial() && coords[d] != 0);
    }
    if (copy) continue;
    const LocalPiece piece = localPiece(m.shape, m.placements, mesh, r);
    at::Tensor region = full;
    for (size_t dim = 0; dim < piece.shape.size(); ++dim) region = region.narrow(static_cast<int64_t>(dim), piece.offset[dim], piece.shape[dim]);
    const at::Tensor part = pieces[r].readable(ctx.device);
    if (first) region.copy_(part);  // exact, signed zeros included
    else if (m.dtype == DType::Bool) region.logical_or_(part);  // a bool "sum" is any
    else region.add_(part);
  }
  if (averaged > 1) {
    if (c10::isIntegralType(m.dtype, /*includeBool=*/false)) full.div_(averaged, "floor");
    else if (m.dtype != DType::Bool) full.div_(averaged);
  }
  finishReads(pieces);
  ctx.outputs.push_back(full);
}

}  // namespace

void registerRedistributeOps(OpRegistry& registry) {
  OpDef redistribute{"redistribute", 1, "nPlacements, placements...", inferRedistribute, runRedistribute};
  redistribute.communicates = true;
  registry.add(redistribute);
  OpDef transfer{"transfer", 1, "targetMeshId", inferTransfer, runTransfer};
  transfer.receivesFromInputMesh = true;
  registry.add(transfer);
  OpDef transferPieces{"transfer_pieces", 1, "targetMeshId", inferTransferPieces, runTransferPieces};
  transferPieces.receivesFromInputMesh = true;
  transferPieces.sendsFromEveryInputRank = true;
  registry.add(transferPieces);
  registry.add({"to_local", 1, "rank, targetMeshId", inferToLocal, runToLocal});
  OpDef gather{"gather", 1, "targetMeshId", inferGather, runGather};
  gather.receivesFromInputMesh = true;
  gather.sendsFromEveryInputRank = true;
  registry.add(gather);
}

}  // namespace dtorch::core
