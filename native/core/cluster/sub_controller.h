// SubController: a worker node's side of the op stream. It applies the main node's payloads in
// order: cluster devices, meshes (registered with the main node's ids), and segments, whose
// nodes it checks against the tensors it knows, gives their op state again (running each op's
// inference here, as the main node's recorder did), and hands to this process's controller,
// which lowers only the ranks this node holds. Nodes on meshes without a rank here are skipped.
// Reads and syncs it answers post their result to `replies` (the engine's outbox, which outlives
// this object: a kernel may answer after the node left the cluster). A payload that does not fit is
// refused whole: apply() throws PROTOCOL_ERROR and nothing of it is applied.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "common/id_map.h"
#include "core/cluster/outbox.h"
#include "core/cluster/stream_codec.h"
#include "core/operand/mesh_table.h"
#include "core/operand/meta.h"

namespace dtorch::core {

// What a sub-controller applies the op stream to: this process's engine, which implements it
// (runner/engine.h), so that the cluster layer names no layer above its own.
class StreamTarget {
 public:
  virtual const MeshTable& meshes() const = 0;
  // A mesh of the main node's, taking the id it has there (Engine::addStreamedMesh).
  virtual const DeviceMesh& addStreamedMesh(const DeviceMesh& mesh, bool held) = 0;
  // Hands a checked segment to this process's controller.
  virtual void submit(std::shared_ptr<Segment> segment) = 0;

 protected:
  ~StreamTarget() = default;
};

class SubController {
 public:
  SubController(StreamTarget& engine, Outbox& replies) : engine_(engine), replies_(replies) {}
  void apply(std::string_view payload);
  // Tensors this node knows (for tests and the benchmark).
  size_t liveTensors() const { return live_.size(); }

 private:
  void applyMesh(const DeviceMesh& mesh);
  void applySegment(std::vector<Node>&& nodes);
  bool hasLocalRank(int meshId) const;

  StreamTarget& engine_;
  Outbox& replies_;
  common::IdMap<TensorMeta> live_{4096};
  std::vector<bool> meshHasLocalRank_;  // by mesh id
};

}  // namespace dtorch::core
