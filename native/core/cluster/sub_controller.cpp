#include "core/cluster/sub_controller.h"

#include <memory>
#include <unordered_map>

#include "common/error.h"
#include "core/membership/membership.h"
#include "core/operators/op.h"
#include "core/program/completion.h"

namespace dtorch::core {

namespace {

[[noreturn]] void refuse(const std::string& what) { common::fail(common::code::kProtocol, "refused op stream payload: " + what); }

}  // namespace

void SubController::apply(std::string_view payload) {
  stream::Message message = stream::decode(payload);
  switch (message.type) {
    case stream::Type::kDevices:
      try {
        ClusterMembership::instance().addDevices(message.devices);
      } catch (const common::DTorchError& e) {
        refuse(e.what());
      }
      break;
    case stream::Type::kMesh: applyMesh(message.mesh); break;
    case stream::Type::kSegment: applySegment(std::move(message.nodes)); break;
    default: refuse("a worker takes devices, meshes and segments, not message type " + std::to_string(static_cast<int>(message.type)));
  }
}

void SubController::applyMesh(const DeviceMesh& mesh) {
  const int expected = static_cast<int>(meshHasLocalRank_.size());
  if (mesh.id != expected) refuse("mesh " + std::to_string(mesh.id) + " arrived where mesh " + std::to_string(expected) + " was due");
  const ClusterMembership& cluster = ClusterMembership::instance();
  bool local = false, unheld = false;
  for (int rank = 0; rank < mesh.size(); ++rank) {
    const int node = cluster.nodeOf(mesh.device(rank));
    unheld = unheld || node < 0;
    local = local || node == cluster.thisNode();
  }
  const DeviceMesh* made = nullptr;
  try {
    // a mesh of a cluster that ended (its devices are no node's now) keeps its id; nothing runs on it
    made = &engine_.addStreamedMesh(mesh, !unheld);
  } catch (const common::DTorchError& e) {  // e.g. a device this host does not have
    refuse("mesh " + std::to_string(mesh.id) + ": " + e.what());
  }
  if (made->id != mesh.id) refuse("mesh " + std::to_string(mesh.id) + " took id " + std::to_string(made->id) + " here");
  meshHasLocalRank_.push_back(local && !unheld);
}

bool SubController::hasLocalRank(int meshId) const {
  if (meshId < 0 || meshId >= static_cast<int>(meshHasLocalRank_.size())) refuse("mesh " + std::to_string(meshId) + " is not known here");
  return meshHasLocalRank_[meshId];
}

void SubController::applySegment(std::vector<Node>&& nodes) {
  const MeshTable& meshes = engine_.meshes();
  const ClusterMembership& cluster = ClusterMembership::instance();
  // What this segment makes and releases, applied to live_ only once every node fits.
  std::unordered_map<int64_t, TensorMeta> made;
  std::unordered_map<int64_t, bool> released;
  auto metaOf = [&](int64_t id, const Node& node) -> const TensorMeta& {
    if (!released.count(id)) {
      auto found = made.find(id);
      if (found != made.end()) return found->second;
      if (const TensorMeta* live = live_.find(id)) return *live;
    }
    refuse("node " + std::to_string(node.seq) + " reads tensor " + std::to_string(id) + ", which this node does not hold");
  };
  auto segment = std::make_shared<Segment>();
  segment->nodes.reserve(nodes.size());
  for (Node& node : nodes) {
    switch (node.kind) {
      case NodeKind::kCompute: {
        if (!hasLocalRank(node.meshId) && !hasLocalRank(node.inputMeshId)) continue;
        c10::SmallVector<const TensorMeta*, 4> inputs;
        for (int64_t id : node.inputs) inputs.push_back(&metaOf(id, node));
        c10::SmallVector<double, 4> derived;
        std::shared_ptr<const OpState> state;
        Outputs outputs;
        const c10::ArrayRef<double> given(node.attrs.data(), node.userAttrs);
        InferContext ctx{*node.op, inputs, given, meshes, derived, state};
        try {
          node.op->infer(ctx, outputs);  // the op state (plans, meeting points) is this node's own
        } catch (const std::exception& e) {
          refuse("node " + std::to_string(node.seq) + " (" + std::string(node.op->name) + ") does not infer here: " + e.what());
        }
        if (outputs.size() != node.outputs.size()) {
          refuse("node " + std::to_string(node.seq) + " (" + std::string(node.op->name) + ") has " + std::to_string(node.outputs.size()) +
                 " outputs; its inference here gives " + std::to_string(outputs.size()));
        }
        for (size_t k = 0; k < outputs.size(); ++k) {
          const TensorMeta& sent = node.outputMetas[k];
          outputs[k].placements = sent.placements;  // placed by the main node's signature match
          if (!sameMeta(outputs[k], sent)) {
            refuse("node " + std::to_string(node.seq) + " (" + std::string(node.op->name) + ")'s output " + std::to_string(k) +
                   " is not what its inference gives here");
          }
          if (made.count(node.outputs[k]) || live_.contains(node.outputs[k])) {
            refuse("node " + std::to_string(node.seq) + " writes tensor " + std::to_string(node.outputs[k]) + " again");
          }
        }
        if (node.op->keepsInputMetas) {
          for (const TensorMeta* m : inputs) node.inputMetas.push_back(*m);
        }
        node.state = std::move(state);
        for (size_t k = 0; k < outputs.size(); ++k) made[node.outputs[k]] = node.outputMetas[k];
        break;
      }
      case NodeKind::kRelease: {
        const int64_t id = node.outputs[0];
        // a tensor made before this node joined, or on meshes it has no rank of, is not here
        if (released.count(id) || (!made.count(id) && !live_.contains(id))) continue;
        released[id] = true;
        break;
      }
      case NodeKind::kFetch: {
        if (!hasLocalRank(node.meshId)) continue;
        metaOf(node.inputs[0], node);
        const DeviceMesh& mesh = meshes.get(node.meshId);
        if (cluster.isLocal(mesh.device(0))) {  // this node answers
          auto completion = std::make_shared<Completion>();
          completion->deliver = [replies = &replies_, seq = node.seq](FetchResult&& result) { replies->post(stream::encodeRead(seq, result)); };
          node.completion = std::move(completion);
        }
        break;
      }
      case NodeKind::kSync: {
        auto completion = std::make_shared<Completion>();
        completion->deliver = [replies = &replies_, seq = node.seq](FetchResult&& result) { replies->post(stream::encodeSynced(seq, result)); };
        node.completion = std::move(completion);
        break;
      }
    }
    segment->nodes.push_back(std::move(node));
  }
  for (auto& [id, meta] : made) live_.put(id, std::move(meta));
  for (const auto& [id, unused] : released) live_.erase(id);
  if (!segment->nodes.empty()) engine_.submit(std::move(segment));
}

}  // namespace dtorch::core
