#include "core/operand/mesh_table.h"

#include "common/error.h"

namespace dtorch::core {

const DeviceMesh& MeshTable::add(DeviceMesh mesh) {
  std::lock_guard<std::mutex> lock(addMutex_);
  const int id = count_.load(std::memory_order_relaxed);
  if (id >= kCapacity) {
    common::fail(common::code::kInvalidMesh, "too many device meshes (" + std::to_string(kCapacity) +
                                                 "); reuse meshes instead of creating one per call");
  }
  mesh.id = id;
  meshes_.push_back(std::make_unique<const DeviceMesh>(std::move(mesh)));
  count_.store(id + 1, std::memory_order_release);
  return *meshes_.back();
}

const DeviceMesh* MeshTable::find(DeviceKind kind, const std::vector<int>& devices, const std::vector<int64_t>& shape) const {
  const int count = count_.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    const DeviceMesh& m = *meshes_[i];
    if (m.kind == kind && m.devices == devices && m.shape == shape && !unusable(i)) return &m;
  }
  return nullptr;
}

const DeviceMesh& MeshTable::get(int id) const {
  if (id < 0 || id >= count_.load(std::memory_order_acquire)) {
    common::fail(common::code::kInvalidMesh, "no device mesh with id " + std::to_string(id));
  }
  return *meshes_[id];
}

}  // namespace dtorch::core
