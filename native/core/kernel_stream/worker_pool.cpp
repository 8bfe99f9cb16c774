#include "core/kernel_stream/worker_pool.h"

#include <algorithm>
#include <thread>

#include "common/env.h"
#include "common/error.h"
#include "core/membership/membership.h"

namespace dtorch::core {

void WorkerPool::registerMesh(const DeviceMesh& mesh) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int>(meshWorkers_.size()) != mesh.id) {
    common::fail(common::code::kInternal, "meshes must be registered in id order");
  }
  std::vector<Worker*> ranks;
  const ClusterMembership& cluster = ClusterMembership::instance();
  for (int rank = 0; rank < mesh.size(); ++rank) {
    if (!cluster.isLocal(mesh.device(rank))) {  // another node of the cluster runs this rank
      ranks.push_back(nullptr);
      continue;
    }
    const Device device = cluster.localDevice(mesh.device(rank));
    auto& slot = byDevice_[{static_cast<int>(device.kind), device.index}];
    if (!slot) slot = std::make_unique<Worker>(device);
    ranks.push_back(slot.get());
  }
  meshWorkers_.push_back(std::move(ranks));
  rebalanceCpuThreads();
}

const std::vector<Worker*>& WorkerPool::workersOf(int meshId) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return meshWorkers_.at(meshId);
}

size_t WorkerPool::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return byDevice_.size();
}

std::vector<Worker*> WorkerPool::all() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Worker*> workers;
  for (auto& [key, worker] : byDevice_) workers.push_back(worker.get());
  return workers;
}

void WorkerPool::abandonAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, worker] : byDevice_) worker->abandon();
}

void WorkerPool::stopAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, worker] : byDevice_) worker->stop();
}

void WorkerPool::rebalanceCpuThreads() {
  int cpuWorkers = 0;
  for (auto& [key, worker] : byDevice_) cpuWorkers += worker->device().kind == DeviceKind::kCpu;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t configured = common::settings().intraOpThreads;
  const int threads = configured > 0 ? static_cast<int>(configured) : std::max(1, cores / std::max(1, cpuWorkers));
  for (auto& [key, worker] : byDevice_) {
    if (worker->device().kind == DeviceKind::kCpu) worker->setIntraOpThreads(threads);
  }
}

}  // namespace dtorch::core
