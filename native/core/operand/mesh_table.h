// MeshTable: every DeviceMesh the client created, by id. Meshes are immutable and never
// removed; the table never reallocates, so readers (the controller, every record) index it
// without a lock while the JS thread appends.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/operand/mesh.h"

namespace dtorch::core {

class MeshTable {
 public:
  static constexpr int kCapacity = 4096;
  MeshTable() { meshes_.reserve(kCapacity); }

  const DeviceMesh& add(DeviceMesh mesh);
  // The usable mesh with these devices in this shape, if one was made already (meshes are values).
  const DeviceMesh* find(DeviceKind kind, const std::vector<int>& devices, const std::vector<int64_t>& shape) const;
  // Throws INVALID_MESH for an id that was never created.
  const DeviceMesh& get(int id) const;
  int size() const { return count_.load(std::memory_order_acquire); }
  // A mesh with a rank on a cluster node that was lost or is gone: nothing may be recorded on it
  // (its collectives would wait for a peer that never comes).
  void markUnusable(int id) { unusable_[id].store(true, std::memory_order_release); }
  bool unusable(int id) const { return id >= 0 && id < kCapacity && unusable_[id].load(std::memory_order_acquire); }

 private:
  std::atomic<bool> unusable_[kCapacity] = {};
  std::mutex addMutex_;
  std::vector<std::unique_ptr<const DeviceMesh>> meshes_;  // capacity fixed at kCapacity
  std::atomic<int> count_{0};                                // published after the append
};

}  // namespace dtorch::core
