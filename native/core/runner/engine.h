// Engine: the client, the controller and the workers of one process, wired together.
// The bindings hold one Engine; everything else reaches the engine through it.
#pragma once
#include <memory>
#include <vector>

#include "core/graph/recorder.h"
#include "core/kernel_stream/worker_pool.h"
#include "core/operand/mesh_table.h"
#include "core/runner/controller.h"

namespace dtorch::core {

struct WorkerInfo {
  Device device;
  int64_t allocatedBytes;  // bytes of the blobs the worker holds right now
  int intraOpThreads;      // as LibTorch reports it on the worker's thread
  int64_t peakBytes;       // highest allocatedBytes since resetPeakMemory()
  int64_t kernelsRun;      // compute kernels run so far
};

class Engine {
 public:
  Engine();
  ~Engine();

  // Validates the devices (kind available, no repeats, shape product) and starts workers.
  const DeviceMesh& createMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape);
  const MeshTable& meshes() const { return meshes_; }
  Recorder& recorder() { return recorder_; }
  // Records a read of tensor `id`. Sharded and partial (sum/avg) tensors are gathered onto the
  // device of rank 0 (each piece moves once); others go through a redistribute to Replicate.
  void fetch(int64_t id, std::shared_ptr<Completion> completion);
  std::vector<WorkerInfo> workers() const;
  void resetPeakMemory();
  // Drains queued work and joins every thread; later calls are no-ops.
  void shutdown();

 private:
  MeshTable meshes_;
  WorkerPool workers_;
  Controller controller_;
  Recorder recorder_;
  bool shutDown_ = false;
};

}  // namespace dtorch::core
