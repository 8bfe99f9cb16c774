// Engine: the client, the controller and the workers of one process, wired together.
// The bindings hold one Engine; everything else reaches the engine through it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster/outbox.h"
#include "core/cluster/remote_waits.h"
#include "core/cluster/sub_controller.h"
#include "core/graph/recorder.h"
#include "core/kernel_stream/worker_pool.h"
#include "core/membership/membership.h"
#include "core/operand/mesh_table.h"
#include "core/runner/controller.h"

namespace dtorch::core {

struct WorkerInfo {
  Device device;
  int64_t allocatedBytes;  // bytes of the blobs the worker holds right now
  int intraOpThreads;      // as LibTorch reports it on the worker's thread
  int64_t peakBytes;       // highest allocatedBytes since resetPeakMemory()
  int64_t kernelsRun;      // compute kernels run so far
  // its CUDA graphs (graph_replays.h): captured, spans replayed, their kernels, fallbacks,
  // device bytes held, graphs alive
  int64_t graphsCaptured, graphReplays, graphReplayedKernels, graphFallbacks, graphBytes, graphsLive;
};

class Engine final : public StreamTarget {
 public:
  Engine();
  ~Engine();

  // Validates the devices (kind available, no repeats, shape product) and starts workers.
  const DeviceMesh& createMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape);
  const MeshTable& meshes() const override { return meshes_; }
  Recorder& recorder() { return recorder_; }
  // Records a read of tensor `id`. Sharded and partial (sum/avg) tensors are gathered onto the
  // device of rank 0 (each piece moves once); others go through a redistribute to Replicate. In a
  // cluster, a mesh with ranks on other nodes reads through a redistribute to Replicate, and the
  // node of its rank 0 answers.
  void fetch(int64_t id, std::shared_ptr<Completion> completion);
  // Whether a read of `id` is answered by another node of the cluster (its rank 0 is there).
  bool answeredElsewhere(int64_t id) const;
  // Records a sync: done once every worker (of every node, in a cluster) ran what came before.
  void sync(std::shared_ptr<Completion> completion);
  // Hands a segment to the controller (a worker node's sub-controller does).
  void submit(std::shared_ptr<Segment> segment) override { controller_.submit(std::move(segment)); }

  // ---- the cluster (core/cluster; docs/cluster.md) ----
  // Joins cluster `epoch` as node `thisNode` with the cluster's devices known so far. The main
  // node (0) then streams every segment, mesh and device change through outbox(); a worker
  // applies what the main node streams (applyStreamed) and posts its answers to outbox(). The
  // main node's own devices must include every device this process already uses.
  void joinCluster(int thisNode, uint64_t epoch, std::shared_ptr<external::torch::RendezvousStore> store,
                   const std::vector<ClusterDevice>& devices, std::string glooHost);
  // A worker: a mesh of the main node's, which takes the next id as there (no layout is looked
  // up: the main node's table may hold a layout twice, once from a cluster that ended). `held`:
  // every device is some node's now, and it is checked as createMesh does; else the mesh is from
  // a cluster that ended, and nothing runs on it.
  const DeviceMesh& addStreamedMesh(const DeviceMesh& mesh, bool held) override;
  // The main node: devices of a worker that joined (also streamed to the workers already there).
  void addClusterDevices(const std::vector<ClusterDevice>& devices);
  // The main node: what a worker joining now needs first (every device, every mesh).
  std::vector<std::string> clusterSnapshot() const;
  // A worker: one payload from the main node (throws PROTOCOL_ERROR, applying nothing of it).
  void applyStreamed(std::string_view payload);
  // The main node: one payload from worker `node` (a read, a sync, a refusal).
  void answerFrom(int node, std::string_view payload);
  // The main node: `node` is gone; every wait on another node fails with NODE_LOST and `message`.
  void nodeLost(int node, const std::string& message);
  // Leaves the cluster; every wait on another node fails with `message` (SHUTDOWN).
  void leaveCluster(const std::string& message);
  Outbox& outbox() { return outbox_; }
  size_t remoteWaits() const { return remote_.pending(); }
  std::vector<WorkerInfo> workers() const;
  RepeatStats repeatStats() const { return controller_.repeatStats(); }
  void setGraphs(bool on) { controller_.setGraphs(on); }
  bool graphs() const { return controller_.graphs(); }
  void resetPeakMemory();
  // Drains queued work and joins every thread; later calls are no-ops.
  void shutdown();

 private:
  // Throws INVALID_MESH for devices that do not fit (kind available, no repeats, shape product).
  void checkMesh(DeviceKind kind, const std::vector<int>& devices, const std::vector<int64_t>& shape) const;
  const DeviceMesh& addMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape);

  MeshTable meshes_;
  WorkerPool workers_;
  Controller controller_;
  Recorder recorder_;
  Outbox outbox_;
  RemoteWaits remote_;
  std::unique_ptr<SubController> sub_;  // a worker node's
  bool streaming_ = false;              // the main node of a running cluster
  bool shutDown_ = false;
};

}  // namespace dtorch::core
