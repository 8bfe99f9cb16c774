#include "core/graph/recorder.h"

#include "common/error.h"
#include "core/runner/completion.h"
#include "core/runner/controller.h"

namespace dtorch::core {

Recorder::Recorder(const MeshTable& meshes, Controller& controller)
    : meshes_(meshes), controller_(controller), open_(std::make_shared<Segment>()) {
  open_->nodes.reserve(flushThreshold_);
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

Recorder::Recorded Recorder::record(const OpDef& op, c10::ArrayRef<int64_t> inputs, c10::ArrayRef<double> attrs,
                             at::Tensor hostData) {
  if (op.numInputs >= 0 && static_cast<int>(inputs.size()) != op.numInputs) {
    common::fail(common::code::kInvalidArgument, std::string(op.name) + ": expected " + std::to_string(op.numInputs) +
                                                     " tensor inputs, got " + std::to_string(inputs.size()));
  }
  c10::SmallVector<const TensorMeta*, 4> inputMetas;
  for (int64_t id : inputs) inputMetas.push_back(&meta(id));
  Outputs outputs;
  op.infer(InferContext{op, inputMetas, attrs, meshes_}, outputs);  // throws at the user's call

  Node& node = append(NodeKind::kCompute);
  node.op = &op;
  node.meshId = outputs.empty() ? 0 : outputs[0].meshId;
  node.inputs.assign(inputs.begin(), inputs.end());
  node.attrs.assign(attrs.begin(), attrs.end());
  node.hostData = std::move(hostData);
  for (TensorMeta& out : outputs) {
    const int64_t id = nextId_++;
    node.outputs.push_back(id);
    track(out, +1);
    live_.put(id, out);  // may move entries: inputMetas are not used past this point
  }
  node.outputMetas = std::move(outputs);
  Recorded recorded{node.seq, node.outputs};
  if (open_->nodes.size() >= flushThreshold_) flush();
  return recorded;
}

void Recorder::release(int64_t id) {
  const TensorMeta* meta = live_.find(id);
  if (!meta) return;  // releasing twice is harmless
  Node& node = append(NodeKind::kRelease);
  node.meshId = meta->meshId;
  node.outputs.push_back(id);
  track(*meta, -1);
  live_.erase(id);
  if (open_->nodes.size() >= flushThreshold_) flush();
}

void Recorder::fetch(int64_t id, std::shared_ptr<Completion> completion) {
  const TensorMeta& m = meta(id);
  Node& node = append(NodeKind::kFetch);
  node.meshId = m.meshId;
  node.inputs.push_back(id);
  node.completion = std::move(completion);
  flush();
}

void Recorder::sync(std::shared_ptr<Completion> completion) {
  Node& node = append(NodeKind::kSync);
  node.completion = std::move(completion);
  flush();
}

void Recorder::flush() {
  if (open_->nodes.empty()) return;
  auto segment = std::move(open_);
  open_ = std::make_shared<Segment>();
  open_->nodes.reserve(flushThreshold_);
  controller_.submit(std::move(segment));
}

void Recorder::track(const TensorMeta& meta, int sign) {
  const int64_t bytes = meta.nbytes();
  liveBytes_ += sign * bytes;
  const DeviceMesh& mesh = meshes_.get(meta.meshId);
  for (int rank = 0; rank < mesh.size(); ++rank) {
    const Device device = mesh.device(rank);
    auto& entry = perDevice_[(static_cast<int64_t>(device.kind) << 32) + device.index];
    entry.device = device;
    entry.numTensors += sign;
    entry.numBytes += sign * bytes;  // every rank holds the full tensor under Replicate
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
