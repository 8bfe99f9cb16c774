#include "core/runner/engine.h"

#include <set>

#include "common/env.h"
#include "common/error.h"
#include "common/format.h"
#include "core/cluster/stream_codec.h"
#include "external/torch/process_group.h"
#include "external/torch/torch_info.h"

namespace dtorch::core {

Engine::Engine() : controller_(meshes_, workers_), recorder_(meshes_, controller_) {}

Engine::~Engine() { shutdown(); }

void Engine::checkMesh(DeviceKind kind, const std::vector<int>& devices, const std::vector<int64_t>& shape) const {
  using common::code::kInvalidMesh;
  const common::Settings& settings = common::settings();  // a malformed setting is refused here, on the JS thread
  if (devices.empty()) common::fail(kInvalidMesh, "a device mesh needs at least one device");
  int64_t product = 1;
  for (int64_t s : shape) product *= s;
  if (product != static_cast<int64_t>(devices.size())) {
    common::fail(kInvalidMesh, "mesh shape " + common::formatList(shape) + " holds " + std::to_string(product) +
                                   " devices but " + std::to_string(devices.size()) + " were given");
  }
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0) common::fail(kInvalidMesh, "device index " + std::to_string(d) + " is negative");
    if (!seen.insert(d).second) {
      common::fail(kInvalidMesh, "device " + std::to_string(d) + " appears more than once in " + common::formatList(devices) +
                                     "; each device may hold one rank of a mesh");
    }
  }
  const ClusterMembership& cluster = ClusterMembership::instance();
  std::vector<int> local;  // this host's devices among them
  for (int d : devices) {
    const Device device{kind, d};
    const int node = cluster.nodeOf(device);
    if (node < 0) {
      common::fail(kInvalidMesh, device.name() + " is not a device of the cluster; dt.cluster.devices() lists them, by the index a mesh names");
    }
    if (node == cluster.thisNode()) local.push_back(cluster.localDevice(device).index);
  }
  if (kind == DeviceKind::kCpu) {
    // CPU devices are worker threads; cap them so a typo cannot start thousands of threads
    const int64_t available = settings.cpuDevices;
    for (int d : local) {
      if (d >= available) {
        common::fail(kInvalidMesh, "cpu device " + std::to_string(d) + " does not exist: this process has cpu devices 0.." +
                                       std::to_string(available - 1) + " (set DTORCH_CPU_DEVICES for more)");
      }
    }
  }
  if (kind == DeviceKind::kCuda) {
    const int available = external::torch::cudaDeviceCount();
    for (int d : local) {
      if (d >= available) {
        common::fail(kInvalidMesh, "cuda device " + std::to_string(d) + " does not exist: this process sees " +
                                       std::to_string(available) + " CUDA device(s)" +
                                       (available == 0 ? " (LibTorch was built without CUDA or no GPU is present); use 'cpu'" : ""));
      }
    }
  }
}

const DeviceMesh& Engine::createMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape) {
  checkMesh(kind, devices, shape);
  if (const DeviceMesh* existing = meshes_.find(kind, devices, shape)) return *existing;  // one id per layout
  return addMesh(kind, std::move(devices), std::move(shape));
}

const DeviceMesh& Engine::addMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape) {
  DeviceMesh mesh;
  mesh.kind = kind;
  mesh.devices = std::move(devices);
  mesh.shape = std::move(shape);
  const DeviceMesh& added = meshes_.add(std::move(mesh));
  workers_.registerMesh(added);  // ranks on other nodes of a cluster get no worker here
  if (streaming_) outbox_.post(stream::encodeMesh(added));
  return added;
}

const DeviceMesh& Engine::addStreamedMesh(const DeviceMesh& mesh, bool held) {
  if (held) checkMesh(mesh.kind, mesh.devices, mesh.shape);
  return addMesh(mesh.kind, mesh.devices, mesh.shape);
}

void Engine::fetch(int64_t id, std::shared_ptr<Completion> completion) {
  const TensorMeta& m = recorder_.meta(id);
  const ClusterMembership& cluster = ClusterMembership::instance();
  const DeviceMesh& mesh = meshes_.get(m.meshId);
  if (!cluster.holdsAll(mesh)) {
    // every rank may take part in the read: one on a lost node, or on none, fails it now
    for (int rank = 0; rank < mesh.size(); ++rank) {
      const int holder = cluster.nodeOf(mesh.device(rank));
      if (holder >= 0 && !cluster.isLost(holder)) continue;
      FetchResult lost;
      lost.ok = false;
      lost.code = common::code::kNodeLost;
      lost.message = "cannot read tensor " + std::to_string(id) + ": " +
                     (holder < 0 ? "no node of the cluster holds " + mesh.device(rank).name() + " (its mesh is from a cluster that ended)"
                                 : "node " + std::to_string(holder) + ", which holds its rank " + std::to_string(rank) + " (" +
                                       cluster.describe(mesh.device(rank)) + "), was lost");
      completion->deliver(std::move(lost));
      return;
    }
    const Device answering = mesh.device(0);
    const int node = cluster.nodeOf(answering);
    const uint64_t seq = recorder_.fetch(id, completion);
    if (seq && node != cluster.thisNode()) remote_.expectRead(seq, node, std::move(completion));
    return;
  }
  if (allReplicate(m.placements) || !partialsAdd(m.placements)) {
    recorder_.fetch(id, std::move(completion));
    return;
  }
  const int target = createMesh(mesh.kind, {mesh.devices[0]}, {1}).id;  // the 1-device mesh of rank 0
  recorder_.fetchGathered(id, target, std::move(completion));
}

bool Engine::answeredElsewhere(int64_t id) const {
  const ClusterMembership& cluster = ClusterMembership::instance();
  return cluster.active() && cluster.nodeOf(meshes_.get(recorder_.meta(id).meshId).device(0)) != cluster.thisNode();
}

void Engine::sync(std::shared_ptr<Completion> completion) {
  const ClusterMembership& cluster = ClusterMembership::instance();
  if (!streaming_) {
    recorder_.sync(std::move(completion));
    return;
  }
  std::vector<int> nodes;
  for (int node : cluster.otherNodes()) {
    if (!cluster.isLost(node)) nodes.push_back(node);
  }
  const uint64_t seq = recorder_.sync(RemoteWaits::splitSync(completion, nodes.size()));
  remote_.expectSynced(seq, nodes, std::move(completion));
}

void Engine::joinCluster(int thisNode, uint64_t epoch, std::shared_ptr<external::torch::RendezvousStore> store,
                         const std::vector<ClusterDevice>& devices, std::string glooHost) {
  if (ClusterMembership::instance().active()) common::fail(common::code::kInvalidArgument, "this process is in a cluster already");
  // A device in use keeps its index: it must be one of this node's, named the same cluster-wide.
  for (Worker* w : workers_.all()) {
    bool offered = false;
    for (const ClusterDevice& d : devices) {
      const bool same = d.device.kind == w->device().kind && d.localIndex == w->device().index && d.device.index == d.localIndex;
      offered = offered || (d.node == thisNode && same);
    }
    if (!offered) {
      common::fail(common::code::kInvalidArgument, "this process already uses " + w->device().name() +
                                                       ", which its devices in the cluster leave out; offer it, or start the cluster before making meshes");
    }
  }
  ClusterMembership& cluster = ClusterMembership::instance();
  cluster.join(thisNode, epoch, std::move(store), std::move(glooHost));
  try {
    cluster.addDevices(devices);
  } catch (...) {
    cluster.leave();
    throw;
  }
  if (thisNode == 0) {
    streaming_ = true;
    recorder_.setSegmentTap([this](const Segment& segment) { outbox_.post(stream::encodeSegment(segment)); });
  } else {
    sub_ = std::make_unique<SubController>(*this, outbox_);
  }
}

void Engine::addClusterDevices(const std::vector<ClusterDevice>& devices) {
  ClusterMembership::instance().addDevices(devices);
  if (streaming_) outbox_.post(stream::encodeDevices(devices));
}

std::vector<std::string> Engine::clusterSnapshot() const {
  std::vector<std::string> out{stream::encodeDevices(ClusterMembership::instance().devices())};
  for (int id = 0; id < meshes_.size(); ++id) out.push_back(stream::encodeMesh(meshes_.get(id)));
  return out;
}

void Engine::applyStreamed(std::string_view payload) {
  if (!sub_) common::fail(common::code::kInvalidArgument, "this process is not a worker node of a cluster");
  try {
    sub_->apply(payload);
  } catch (const std::exception& e) {  // the main node must not wait for answers that will not come
    outbox_.post(stream::encodeRejected(e.what()));
    throw;
  }
}

void Engine::answerFrom(int node, std::string_view payload) {
  stream::Message message = stream::decode(payload);
  switch (message.type) {
    case stream::Type::kRead:
    case stream::Type::kSynced: remote_.answer(node, message.seq, std::move(message.result)); break;
    case stream::Type::kRejected:
      nodeLost(node, "node " + std::to_string(node) + " refused the op stream and no longer follows the program: " + message.why);
      break;
    default: common::fail(common::code::kProtocol, "a worker answers with reads, syncs and refusals, not message type " + std::to_string(static_cast<int>(message.type)));
  }
}

void Engine::nodeLost(int node, const std::string& message) {
  ClusterMembership& cluster = ClusterMembership::instance();
  for (int id = 0; id < meshes_.size(); ++id) {
    const DeviceMesh& mesh = meshes_.get(id);
    for (int rank = 0; rank < mesh.size(); ++rank) {
      if (cluster.nodeOf(mesh.device(rank)) == node) meshes_.markUnusable(id);
    }
  }
  cluster.markLost(node);
  remote_.failAll(common::code::kNodeLost, message);
}

void Engine::leaveCluster(const std::string& message) {
  for (int id = 0; id < meshes_.size(); ++id) {  // meshes with other nodes' ranks are done for
    if (!ClusterMembership::instance().holdsAll(meshes_.get(id))) meshes_.markUnusable(id);
  }
  if (sub_) {  // a worker node: the main node reads nothing more, so queued work is dropped
    workers_.abandonAll();
    sub_.reset();
  }
  streaming_ = false;
  recorder_.setSegmentTap(nullptr);
  remote_.failAll(common::code::kShutdown, message);
  // collectives with other nodes end now: a peer that stopped answering (a main node stopped or
  // cut off) would hold them, and this process's exit, for the whole collective timeout
  external::torch::abortGlooGroups(message);
  ClusterMembership::instance().leave();
}

std::vector<WorkerInfo> Engine::workers() const {
  std::vector<WorkerInfo> out;
  for (Worker* w : workers_.all()) {
    const GraphCounters& g = w->graphs();
    const auto read = [](const std::atomic<int64_t>& v) { return v.load(std::memory_order_relaxed); };
    out.push_back({w->device(), w->allocatedBytes(), w->intraOpThreadsInUse(), w->peakBytes(), w->kernelsRun(), read(g.captured),
                   read(g.replays), read(g.replayedKernels), read(g.fallbacks), read(g.bytes), read(g.live)});
  }
  return out;
}

void Engine::resetPeakMemory() {
  for (Worker* w : workers_.all()) w->resetPeak();
}

void Engine::shutdown() {
  if (shutDown_) return;
  shutDown_ = true;
  recorder_.flush();
  controller_.stop();
  workers_.stopAll();
}

}  // namespace dtorch::core
