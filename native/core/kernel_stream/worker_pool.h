// WorkerPool: one worker per device, started when a mesh first names the device, and the
// rank -> worker map of every mesh. Intra-op threads are split between CPU workers so that
// N CPU workers do not oversubscribe the cores.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/kernel_stream/worker.h"
#include "core/operand/mesh.h"

namespace dtorch::core {

class WorkerPool {
 public:
  void registerMesh(const DeviceMesh& mesh);
  const std::vector<Worker*>& workersOf(int meshId) const;
  std::vector<Worker*> all() const;
  size_t count() const;  // how many all() gives
  void stopAll();
  // Every worker skips what is queued (Worker::abandon).
  void abandonAll();

 private:
  void rebalanceCpuThreads();  // caller holds mutex_

  mutable std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<Worker>> byDevice_;
  std::deque<std::vector<Worker*>> meshWorkers_;  // index: mesh id
};

}  // namespace dtorch::core
