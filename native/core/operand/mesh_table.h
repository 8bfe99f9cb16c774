// MeshTable: every DeviceMesh the client created, by id. Meshes are immutable and never
// removed, so a pointer handed out stays valid for the engine's lifetime.
#pragma once
#include <deque>
#include <mutex>

#include "core/operand/mesh.h"

namespace dtorch::core {

class MeshTable {
 public:
  const DeviceMesh& add(DeviceMesh mesh);
  // Throws INVALID_MESH for an id that was never created.
  const DeviceMesh& get(int id) const;

 private:
  mutable std::mutex mutex_;
  std::deque<DeviceMesh> meshes_;
};

}  // namespace dtorch::core
