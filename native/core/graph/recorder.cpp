#include "core/graph/recorder.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "common/env.h"
#include "common/error.h"
#include "common/format.h"
#include "common/log.h"
#include "core/membership/membership.h"
#include "core/operand/layout.h"
#include "core/operators/registry.h"
#include "core/program/completion.h"

namespace dtorch::core {

Recorder::Recorder(const MeshTable& meshes, SegmentSink& sink)
    : meshes_(meshes), sink_(sink) {
  open_ = freshSegment();  // here, once the thresholds it reads are set
}

void Recorder::setFlushThreshold(int64_t nodes) {
  if (nodes < 1 || nodes > static_cast<int64_t>(kMaxFlushThreshold)) {
    common::fail(common::code::kInvalidArgument, "Expected integer from 1 to " + std::to_string(kMaxFlushThreshold) +
                                                     " for segment nodes but received " + std::to_string(nodes) + " of type number");
  }
  flushThreshold_ = static_cast<size_t>(nodes);
  segmentLimit_ = std::min(segmentLimit_, flushThreshold_);
}

const TensorMeta& Recorder::meta(int64_t id) const {
  const TensorMeta* found = live_.find(id);
  if (!found) {
    common::fail(common::code::kDisposed, "tensor " + std::to_string(id) +
                                              " was disposed (or never existed); keep it out of tidy() or call "
                                              "keep() on it to use it later");
  }
  return *found;
}

Node& Recorder::append(NodeKind kind) {
  Node& node = open_->nodes.emplace_back();
  node.kind = kind;
  node.seq = nextSeq_++;
  return node;
}

Recorder::Recorded Recorder::record(const OpDef& op, c10::ArrayRef<int64_t> inputIds, c10::ArrayRef<double> attrs,
                                    at::Tensor hostData) {
  if (op.numInputs >= 0 && static_cast<int>(inputIds.size()) != op.numInputs) {
    common::fail(common::code::kInvalidArgument, std::string(op.name) + ": expected " + std::to_string(op.numInputs) +
                                                     " tensor inputs, got " + std::to_string(inputIds.size()));
  }
  c10::SmallVector<int64_t, 4> inputs(inputIds.begin(), inputIds.end());
  c10::SmallVector<const TensorMeta*, 4> inputMetas;
  for (int64_t id : inputs) inputMetas.push_back(&meta(id));
  const int inputMeshId = inputMetas.empty() ? 0 : inputMetas[0]->meshId;
  Outputs outputs;
  c10::SmallVector<double, 4> derived;
  std::shared_ptr<const OpState> state;
  InferContext ctx{op, inputMetas, attrs, meshes_, derived, state};
  op.infer(ctx, outputs);  // throws at the user's call
  for (int meshId : {inputMetas.empty() ? -1 : inputMeshId, outputs.empty() ? -1 : outputs[0].meshId}) {
    if (meshes_.unusable(meshId)) {
      common::fail(common::code::kNodeLost, std::string(op.name) + ": mesh " + std::to_string(meshId) +
                                                " has a rank on a node of the cluster that was lost or has left; make a mesh over live devices "
                                                "(dt.cluster.devices())");
    }
  }
  c10::SmallVector<int64_t, 2> temporaries;
  if (op.rows) {
    const SignatureMatch match = matchSignature(ctx, op.rows);
    for (TensorMeta& out : outputs) out.placements = match.output;
    // Replicate inputs a row accepts are sliced locally first (the documented auto-redistribute).
    // This records nodes, so inputMetas (pointers into live_) are not used past this point.
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (match.sliceTo[k].empty()) continue;
      inputs[k] = redistributeOnMesh(inputs[k], match.sliceTo[k]);
      temporaries.push_back(inputs[k]);
    }
  }

  c10::SmallVector<TensorMeta, 1> keptInputMetas;  // after any slicing: what the kernel gets
  if (op.keepsInputMetas) {
    for (int64_t id : inputs) keptInputMetas.push_back(meta(id));
  }
  Node& node = append(NodeKind::kCompute);
  node.op = &op;
  node.meshId = outputs.empty() ? 0 : outputs[0].meshId;
  node.inputMeshId = inputMeshId;
  node.inputs = std::move(inputs);
  node.attrs.assign(attrs.begin(), attrs.end());
  node.userAttrs = static_cast<uint32_t>(attrs.size());
  node.attrs.append(derived.begin(), derived.end());
  node.hostData = std::move(hostData);
  node.state = std::move(state);
  node.inputMetas = std::move(keptInputMetas);
  for (TensorMeta& out : outputs) {
    const int64_t id = nextId_++;
    node.outputs.push_back(id);
    track(out, +1);
    live_.put(id, out);
  }
  node.outputMetas = std::move(outputs);
  if (!lost_.empty()) loseOutputsOfLost(node);
  Recorded recorded{node.seq, node.outputs};
  for (int64_t id : temporaries) release(id);
  flushWhenFull();
  return recorded;
}

Recorder::Recorded Recorder::recordHostData(const OpDef& op, c10::ArrayRef<double> attrs, const void* bytes, size_t byteLength, DType source) {
  const size_t n = attrs.size();
  const size_t dtypeAt = n > 1 ? 2 + static_cast<size_t>(attrs[1]) : n;
  const size_t ndim = dtypeAt + 1 < n ? static_cast<size_t>(attrs[dtypeAt + 1]) : 0;
  if (dtypeAt + 2 + ndim > n) common::fail(common::code::kInternal, std::string(op.name) + ": the creation header does not fit its attributes");
  const DType target = dtypeFromCode(static_cast<int>(attrs[dtypeAt]));
  std::vector<int64_t> shape;
  for (size_t i = 0; i < ndim; ++i) shape.push_back(static_cast<int64_t>(attrs[dtypeAt + 2 + i]));
  at::Tensor host = at::empty(shape, at::TensorOptions().dtype(source));
  if (static_cast<size_t>(host.nbytes()) != byteLength) {
    common::fail(common::code::kShapeMismatch, "tensor: data has " + std::to_string(byteLength / host.element_size()) + " elements but shape " +
                                                   common::formatList(shape) + " needs " + std::to_string(host.numel()));
  }
  if (byteLength > 0) std::memcpy(host.data_ptr(), bytes, byteLength);
  if (target != source) host = host.to(target);
  return record(op, {}, attrs, std::move(host));
}

SignatureRows Recorder::signatureRows(const OpDef& op, c10::ArrayRef<int64_t> inputs, c10::ArrayRef<double> attrs) const {
  c10::SmallVector<const TensorMeta*, 4> metas;
  for (int64_t id : inputs) metas.push_back(&meta(id));
  c10::SmallVector<double, 4> derived;
  std::shared_ptr<const OpState> state;
  InferContext ctx{op, metas, attrs, meshes_, derived, state};
  Outputs outputs;
  op.infer(ctx, outputs);
  SignatureRows rows;
  if (op.rows) op.rows(ctx, rows);
  return rows;
}

Recorder::Recorded Recorder::recordRedistribute(int64_t id, const Placements& placements) {
  static const OpDef& op = *OpRegistry::instance().find("redistribute");
  c10::SmallVector<double, 8> attrs{static_cast<double>(placements.size())};
  for (const Placement& p : placements) attrs.push_back(p.encode());
  return record(op, {id}, attrs);
}

int64_t Recorder::redistributeOnMesh(int64_t id, const Placements& placements) {
  return recordRedistribute(id, placements).outputs[0];
}

Recorder::Recorded Recorder::redistribute(int64_t id, int meshId, const Placements& placements) {
  const TensorMeta source = meta(id);
  if (source.meshId == meshId) return recordRedistribute(id, placements);
  const DeviceMesh& target = meshes_.get(meshId);
  const ClusterMembership& cluster = ClusterMembership::instance();
  if (!cluster.holdsAll(target) || !cluster.holdsAll(meshes_.get(source.meshId))) {
    common::fail(common::code::kMeshMismatch, "redistribute: moving a tensor to another mesh when either mesh has ranks on another node "
                                                  "of the cluster is not supported yet; make one mesh that spans both and redistribute on it");
  }
  // meshes of one shape: each rank's piece moves to the target rank of its index (nothing
  // gathered), then the target takes its placements
  if (!allReplicate(source.placements) && meshes_.get(source.meshId).shape == target.shape) {
    static const OpDef& pieces = *OpRegistry::instance().find("transfer_pieces");
    const double targetId = meshId;
    Recorded moved = record(pieces, {id}, c10::ArrayRef<double>(&targetId, 1));
    if (placements == source.placements) return moved;
    Recorded result = recordRedistribute(moved.outputs[0], placements);
    release(moved.outputs[0]);
    return result;
  }
  // gather on the source, hand the full tensor over, then take pieces on the target
  const bool gathered = !allReplicate(source.placements);
  const int64_t full = gathered ? redistributeOnMesh(id, Placements(source.placements.size(), Placement::replicate())) : id;
  static const OpDef& transfer = *OpRegistry::instance().find("transfer");
  const double targetId = meshId;
  Recorded moved = record(transfer, {full}, c10::ArrayRef<double>(&targetId, 1));
  if (gathered) release(full);
  if (allReplicate(placements)) return moved;
  Recorded result = recordRedistribute(moved.outputs[0], placements);
  release(moved.outputs[0]);
  return result;
}

void Recorder::release(int64_t id) {
  const TensorMeta* meta = live_.find(id);
  if (!meta) return;  // releasing twice is harmless
  Node& node = append(NodeKind::kRelease);
  node.meshId = meta->meshId;
  node.outputs.push_back(id);
  track(*meta, -1);
  live_.erase(id);
  if (!lost_.empty()) lost_.erase(id);
  flushWhenFull();
}

uint64_t Recorder::fetch(int64_t id, std::shared_ptr<Completion> completion) {
  const TensorMeta& m = meta(id);
  if (failedAsLost(id, completion)) return 0;
  const int meshId = m.meshId;
  const bool replicated = allReplicate(m.placements);
  // a read gathers: shards concatenate, partials reduce (into a temporary Replicate copy)
  const int64_t readable = replicated ? id : redistributeOnMesh(id, Placements(m.placements.size(), Placement::replicate()));
  Node& node = append(NodeKind::kFetch);
  node.meshId = meshId;
  node.inputs.push_back(readable);
  node.completion = std::move(completion);
  const uint64_t seq = node.seq;
  if (!replicated) release(readable);
  flushBeforeWait();
  return seq;
}

void Recorder::fetchGathered(int64_t id, int targetMeshId, std::shared_ptr<Completion> completion) {
  static const OpDef& gather = *OpRegistry::instance().find("gather");
  if (failedAsLost(id, completion)) return;
  const double target = targetMeshId;
  const int64_t full = record(gather, {id}, c10::ArrayRef<double>(&target, 1)).outputs[0];
  Node& node = append(NodeKind::kFetch);
  node.meshId = targetMeshId;
  node.inputs.push_back(full);
  node.completion = std::move(completion);
  release(full);
  flushBeforeWait();
}

uint64_t Recorder::sync(std::shared_ptr<Completion> completion) {
  Node& node = append(NodeKind::kSync);
  node.completion = std::move(completion);
  const uint64_t seq = node.seq;
  flushBeforeWait();
  return seq;
}

void Recorder::beginStep() {
  flush();
  segmentLimit_ = std::exchange(waitedBeforeStep_, false) ? std::min(kFirstAfterWait, flushThreshold_) : flushThreshold_;
}

void Recorder::beginCall() {
  if (nextSeq_ - lastCallSeq_ >= kCallStepNodes) beginStep();
  lastCallSeq_ = nextSeq_;
}

void Recorder::flushWhenFull() {
  if (open_->nodes.size() < segmentLimit_) return;
  flush();
  if (!replaying_) segmentLimit_ = std::min(segmentLimit_ * 2, flushThreshold_);  // a copy's segments keep their size
}

void Recorder::flushBeforeWait() {
  flush();
  segmentLimit_ = std::min(kFirstAfterWait, flushThreshold_);
  waitedBeforeStep_ = true;
}

std::shared_ptr<Segment> Recorder::freshSegment() const {
  std::shared_ptr<Segment> segment = sink_.takeSpare();
  if (!segment) segment = std::make_shared<Segment>();
  segment->nodes.reserve(std::min(flushThreshold_, kReservedNodes));
  return segment;
}

void Recorder::flush() {
  if (open_->nodes.empty()) return;
  if (trace_) keepTraced(*open_);
  std::shared_ptr<Segment> segment = std::move(open_);
  std::string why;
  try {
    if (!injectedFlushFailure_.empty()) throw std::runtime_error(std::exchange(injectedFlushFailure_, {}));
    if (tap_) tap_(*segment);
    open_ = freshSegment();
    sink_.submit(segment);
    return;
  } catch (const std::exception& e) {
    why = e.what();
  }
  // Nothing reached the controller. Called from a read, an op or the end of a JS task, a throw
  // here would reach no read that depends on the work (and at the end of a task, no caller at
  // all), so the failure goes to the reads instead.
  try {
    dropSegment(*segment, why);
  } catch (const std::exception& e) {  // out of memory even for that: say so, at least
    DTORCH_LOG(common::LogLevel::kError, "a segment could not be handed to the controller (" << why
                                                                                            << ") nor dropped cleanly: " << e.what());
  }
  if (!open_) {
    open_ = std::move(segment);  // holds only the releases to run again
  } else {
    for (Node& node : segment->nodes) open_->nodes.push_back(std::move(node));
  }
}

void Recorder::dropSegment(Segment& segment, const std::string& why) {
  if (trace_) trace_->broken = "its work could not be handed to the controller (" + why + ")";
  DTORCH_LOG(common::LogLevel::kError, "a segment of " << segment.nodes.size() << " nodes could not be handed to the controller: " << why);
  auto lostWhy = std::make_shared<const std::string>("its work could not be handed to the controller (" + why + ")");
  for (Node& node : segment.nodes) {
    if (node.kind == NodeKind::kCompute) {
      for (int64_t id : node.outputs) {
        if (live_.contains(id)) lost_.put(id, lostWhy);
      }
    } else if (node.completion && !node.completion->failed.exchange(true)) {  // a read or a sync
      FetchResult result;
      result.ok = false;
      result.code = common::code::kInternal;
      result.message = "the work recorded before this " + std::string(node.kind == NodeKind::kSync ? "sync" : "read") +
                       " could not be handed to the controller (" + why + ")";
      node.completion->deliver(std::move(result));
    }
  }
  // keep only the releases (in place: no memory is needed for that)
  auto& nodes = segment.nodes;
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [](const Node& n) { return n.kind != NodeKind::kRelease; }), nodes.end());
}

void Recorder::beginTrace() {
  if (trace_) common::fail(common::code::kInternal, "a compiled call is being traced already; compiled calls inside it run as they are");
  trace_ = std::make_unique<OpenTrace>();
  trace_->from = open_->nodes.size();
}

void Recorder::keepTraced(const Segment& segment) {
  for (size_t i = trace_->from; i < segment.nodes.size(); ++i) trace_->nodes.push_back(segment.nodes[i]);
  trace_->from = 0;  // the next segment is all the trace's
}

int64_t Recorder::endTrace(c10::ArrayRef<int64_t> arguments, c10::ArrayRef<int64_t> outputs, std::string& why) {
  if (!trace_) common::fail(common::code::kInternal, "endTrace: no trace is open");
  std::unique_ptr<OpenTrace> open = std::move(trace_);
  if (!open->broken.empty()) {
    why = open->broken;
    return 0;
  }
  for (size_t i = open->from; i < open_->nodes.size(); ++i) open->nodes.push_back(open_->nodes[i]);
  std::vector<TensorMeta> metas;
  for (int64_t id : arguments) {
    const TensorMeta* m = live_.find(id);
    if (!m) {
      why = "it disposes its argument " + std::to_string(id);
      return 0;
    }
    metas.push_back(*m);
  }
  std::unique_ptr<CallTrace> trace = traceCall(open->nodes, arguments, metas, outputs, why);
  if (!trace) return 0;
  trace->headEnd = headCut(*trace, common::settings().replayHeadNodes);
  const int64_t id = nextTraceId_++;
  traces_.emplace(id, std::move(trace));
  return id;
}

bool Recorder::replayTrace(int64_t traceId, c10::ArrayRef<int64_t> arguments, Recorded& recorded) {
  const auto found = traces_.find(traceId);
  if (found == traces_.end()) common::fail(common::code::kInvalidArgument, "replayTrace: no trace " + std::to_string(traceId));
  const std::shared_ptr<const CallTrace> trace = found->second;  // held: a replay may not drop it
  if (arguments.size() != trace->arguments.size()) return false;
  for (size_t k = 0; k < arguments.size(); ++k) {
    const TensorMeta* m = live_.find(arguments[k]);
    if (!m || !sameMeta(*m, trace->arguments[k])) return false;
    size_t first = 0;
    while (arguments[first] != arguments[k]) ++first;
    if (static_cast<int>(first) != trace->argumentAlias[k]) return false;
  }
  for (int64_t id : trace->outside) {
    if (!live_.contains(id)) return false;
  }
  std::vector<int64_t> made;
  made.reserve(static_cast<size_t>(trace->made));
  // The copy is handed over in segments of its own, cut the same way each call, which the
  // controller recognises and a GPU worker replays as graphs: its first part (the trace's head
  // cut, DTORCH_REPLAY_HEAD_NODES), then the rest in segments of up to
  // DTORCH_REPLAY_SEGMENT_NODES (16384: a Flux-dev step is one, and one CUDA graph). Whole, the
  // devices would wait for all of it to be copied and lowered; cut short after a wait, as
  // recorded code is, the copies' spans were rarely replayed (docs/engine.md).
  flush();
  static const size_t replaySegmentNodes = static_cast<size_t>(common::settings().replaySegmentNodes);
  segmentLimit_ = replaySegmentNodes;
  // room for the copy's nodes up front: growing a segment moves every node already in it
  open_->nodes.reserve(std::min(trace->nodes.size(), replaySegmentNodes));
  recorded.seq = nextSeq_;
  replaying_ = true;
  try {
    c10::SmallVector<int64_t, 4> inputs;
    for (size_t at = 0; at < trace->nodes.size(); ++at) {
      if (at == trace->headEnd && at != 0) {  // the devices run the first part while the rest is copied
        flush();
        open_->nodes.reserve(std::min(trace->nodes.size() - at, replaySegmentNodes));
      }
      const TracedNode& traced = trace->nodes[at];
      if (traced.node.kind == NodeKind::kRelease) {
        release(made[static_cast<size_t>(traced.inputs[0].index)]);
        continue;
      }
      inputs.clear();
      for (const TraceRef& ref : traced.inputs) {
        inputs.push_back(ref.role == TraceRef::Role::kArgument ? arguments[static_cast<size_t>(ref.index)]
                         : ref.role == TraceRef::Role::kMade   ? made[static_cast<size_t>(ref.index)]
                                                               : ref.index);
      }
      replayCompute(traced, inputs, made);
    }
  } catch (...) {  // what was copied is freed again: the call records nothing that stays
    replaying_ = false;
    for (int64_t id : made) release(id);
    segmentLimit_ = flushThreshold_;
    throw;
  }
  replaying_ = false;
  flush();
  segmentLimit_ = flushThreshold_;  // what follows is recorded while the devices are busy
  recorded.outputs.clear();
  for (int64_t at : trace->outputs) recorded.outputs.push_back(made[static_cast<size_t>(at)]);
  return true;
}

void Recorder::replayCompute(const TracedNode& traced, c10::ArrayRef<int64_t> inputs, std::vector<int64_t>& made) {
  const Node& from = traced.node;
  std::shared_ptr<const OpState> state;
  if (from.state) {  // state is per node (a redistribute's rendezvous points): infer makes a fresh one
    c10::SmallVector<const TensorMeta*, 4> metas;
    for (int64_t id : inputs) metas.push_back(&meta(id));
    c10::SmallVector<double, 4> derived;
    Outputs outputs;
    InferContext ctx{*from.op, metas, c10::ArrayRef<double>(from.attrs.data(), from.userAttrs), meshes_, derived, state};
    from.op->infer(ctx, outputs);
  }
  Node& node = append(NodeKind::kCompute);
  node.op = from.op;
  node.meshId = from.meshId;
  node.inputMeshId = from.inputMeshId;
  node.inputs.assign(inputs.begin(), inputs.end());
  node.attrs = from.attrs;
  node.userAttrs = from.userAttrs;
  node.inputMetas = from.inputMetas;
  node.outputMetas = from.outputMetas;
  node.state = std::move(state);
  for (const TensorMeta& out : node.outputMetas) {
    const int64_t id = nextId_++;
    node.outputs.push_back(id);
    track(out, +1);
    live_.put(id, out);
    made.push_back(id);
  }
  if (!lost_.empty()) loseOutputsOfLost(node);
  flushWhenFull();
}

void Recorder::loseOutputsOfLost(const Node& node) {
  for (int64_t id : node.inputs) {
    const auto* found = lost_.find(id);
    if (!found) continue;
    const std::shared_ptr<const std::string> why = *found;
    for (int64_t out : node.outputs) lost_.put(out, why);
    return;
  }
}

bool Recorder::failedAsLost(int64_t id, const std::shared_ptr<Completion>& completion) {
  if (lost_.empty()) return false;
  const auto* why = lost_.find(id);
  if (!why) return false;
  FetchResult result;
  result.ok = false;
  result.code = common::code::kInternal;
  result.message = "tensor " + std::to_string(id) + " cannot be read: " + **why;
  completion->deliver(std::move(result));
  return true;
}

void Recorder::track(const TensorMeta& meta, int sign) {
  liveBytes_ += sign * meta.nbytes();
  const DeviceMesh& mesh = meshes_.get(meta.meshId);
  const bool replicated = !anyShard(meta.placements);  // every rank holds the full shape
  for (int rank = 0; rank < mesh.size(); ++rank) {
    const Device device = mesh.device(rank);
    auto& entry = perDevice_[(static_cast<int64_t>(device.kind) << 32) + device.index];
    entry.device = device;
    entry.numTensors += sign;
    int64_t local = meta.nbytes();
    if (!replicated) {
      local = dtypeSize(meta.dtype);
      for (int64_t s : localShape(meta, mesh, rank)) local *= s;
    }
    entry.numBytes += sign * local;
  }
}

MemoryStats Recorder::memory() const {
  MemoryStats stats;
  stats.numTensors = static_cast<int64_t>(live_.size());
  stats.numBytes = liveBytes_;
  for (const auto& [key, entry] : perDevice_) stats.perDevice.push_back(entry);
  return stats;
}

}  // namespace dtorch::core
