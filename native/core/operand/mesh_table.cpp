#include "core/operand/mesh_table.h"

#include "common/error.h"

namespace dtorch::core {

const DeviceMesh& MeshTable::add(DeviceMesh mesh) {
  std::lock_guard<std::mutex> lock(mutex_);
  mesh.id = static_cast<int>(meshes_.size());
  meshes_.push_back(std::move(mesh));
  return meshes_.back();
}

const DeviceMesh& MeshTable::get(int id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id < 0 || id >= static_cast<int>(meshes_.size())) {
    common::fail(common::code::kInvalidMesh, "no device mesh with id " + std::to_string(id));
  }
  return meshes_[id];
}

}  // namespace dtorch::core
