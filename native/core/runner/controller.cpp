#include "core/runner/controller.h"

#include <chrono>
#include <unordered_map>

#include "common/id_map.h"

#include "common/env.h"
#include "common/log.h"
#include "common/word_hash.h"
#include "common/thread_name.h"
#include "core/operators/op.h"
#include "core/program/completion.h"

namespace dtorch::core {

Controller::Controller(const MeshTable& meshes, WorkerPool& workers)
    : meshes_(meshes), workers_(workers), scratch_(std::make_unique<PlanScratch>()), thread_([this] { loop(); }) {}

Controller::~Controller() { stop(); }

void Controller::submit(std::shared_ptr<Segment> segment) { queue_.push(std::move(segment)); }

void Controller::stop() {
  queue_.stop();
  if (thread_.joinable()) thread_.join();
}

void Controller::loop() {
  common::setThreadName("dt-controller");
  for (;;) {
    std::optional<std::shared_ptr<Segment>> taken;
    // while segments are still retiring, wake now and then to destroy the finished ones
    const auto timeout = retired_.empty() ? std::nullopt : std::optional<std::chrono::milliseconds>(2);
    if (!queue_.takeOne(taken, timeout)) break;  // stopped and drained
    if (taken) {
      std::shared_ptr<Segment> segment = std::move(*taken);
      // signed as recorded, before any rewrite; an unsigned batch (nodes == 0) is never replayed
      const RepeatedSegments::Noted noted = graphs() ? repeats_.note(*segment) : RepeatedSegments::Noted{};
      fusion_.fuse(*segment);
      lower(segment, noted.signature, noted.repeat);
      retired_.push_back(std::move(segment));
    }
    sweepRetired();
  }
  retired_.clear();
}

void Controller::sweepRetired() {
  // segments finish in order on each worker; stop at the first one still in use
  while (!retired_.empty() && retired_.front().use_count() == 1) {
    std::shared_ptr<Segment> done = std::move(retired_.front());
    retired_.pop_front();
    done->nodes.clear();  // destroys the nodes here; the storage is kept for the recorder
    std::lock_guard<std::mutex> lock(spareMutex_);
    if (spare_.size() < kMaxSpare) spare_.push_back(std::move(done));
  }
}

std::shared_ptr<Segment> Controller::takeSpare() {
  std::lock_guard<std::mutex> lock(spareMutex_);
  if (spare_.empty()) return nullptr;
  std::shared_ptr<Segment> segment = std::move(spare_.back());
  spare_.pop_back();
  return segment;
}

namespace {

// The rewrite plan of one segment: which compute nodes are dead, which may write their output
// into input 0's buffer (input 0 is released here and this node is its last use), which mark
// where they end for a collective that reads their output, and after which node each released
// tensor can be freed (slot 0: before the first node; i+1: after node i).
struct SegmentPlan {
  std::vector<bool> dead;
  std::vector<bool> reuseInput;
  std::vector<bool> markMade;  // a communicating node of the segment reads an output
  std::vector<std::vector<const Node*>> freeAfter;  // release nodes, by slot
};

}  // namespace

// Scratch maps reused from segment to segment, so planning allocates nothing per node.
struct Controller::PlanScratch {
  common::IdMap<char> released, readLater, neverAllocated, readByCollective;
  common::IdMap<int> lastTouch;  // last node index that writes or reads the id
  common::IdMap<int> releaseIndex;  // a lowering being cached: the release node of each freed id
  void clear() {
    released.clear();
    readLater.clear();
    neverAllocated.clear();
    readByCollective.clear();
    lastTouch.clear();
  }
};

namespace {

SegmentPlan plan(const Segment& segment, Controller::PlanScratch& s) {
  const auto& nodes = segment.nodes;
  const int n = static_cast<int>(nodes.size());
  SegmentPlan result{std::vector<bool>(n, false), std::vector<bool>(n, false), std::vector<bool>(n, false),
                     std::vector<std::vector<const Node*>>(n + 1)};
  s.clear();
  for (const Node& node : nodes) {
    if (node.kind == NodeKind::kRelease) s.released.put(node.outputs[0], 1);
  }
  // Backwards: a compute node whose outputs are all released here and never read is dead.
  // Ids are written once, so every read seen so far comes after the node being visited.
  for (int i = n - 1; i >= 0; --i) {
    const Node& node = nodes[i];
    if (node.kind == NodeKind::kCompute) {
      bool dead = true;
      for (int64_t id : node.outputs) dead = dead && s.released.contains(id) && !s.readLater.contains(id);
      if (dead) {
        result.dead[i] = true;
        for (int64_t id : node.outputs) s.neverAllocated.put(id, 1);
        continue;
      }
      for (int64_t id : node.outputs) {
        s.lastTouch.tryPut(id, i);
        result.markMade[i] = result.markMade[i] || s.readByCollective.contains(id);
      }
      if (node.op->communicates) {
        for (int64_t id : node.inputs) s.readByCollective.put(id, 1);
      }
    }
    if (node.kind == NodeKind::kCompute && node.op->inplace && !node.inputs.empty()) {
      const int64_t first = node.inputs[0];
      result.reuseInput[i] = s.released.contains(first) && !s.readLater.contains(first);
    }
    if (node.kind == NodeKind::kCompute || node.kind == NodeKind::kFetch) {
      for (int64_t id : node.inputs) {
        s.readLater.put(id, 1);
        s.lastTouch.tryPut(id, i);
      }
    }
  }
  for (const Node& node : nodes) {
    if (node.kind != NodeKind::kRelease) continue;
    const int64_t id = node.outputs[0];
    if (s.neverAllocated.contains(id)) continue;
    const int* touch = s.lastTouch.find(id);
    // untouched here: its last use was in an earlier segment, so it can go first
    result.freeAfter[touch ? *touch + 1 : 0].push_back(&node);
  }
  return result;
}

}  // namespace

namespace {

// What decides a segment's lowering beyond its signature: the nodes as fusion left them, the
// meshes of the releases the signature leaves out (tensors from outside that the segment never
// read: they are freed first, on their mesh's ranks), and how many workers a sync waits for.
uint64_t loweringKey(const Segment& segment, const SegmentSignature& signature, size_t workers) {
  common::WordHash h;
  h.add(signature.hash);
  h.add(signature.check);
  h.add(workers);
  h.add(segment.nodes.size());
  for (const Node& node : segment.nodes) {
    h.add(static_cast<uint64_t>(node.kind));
    if (node.kind == NodeKind::kCompute) h.add(reinterpret_cast<uintptr_t>(node.op));
    else if (node.kind == NodeKind::kRelease) h.add(static_cast<uint64_t>(node.meshId));
  }
  return h.value();
}

}  // namespace

void Controller::lowerAgain(const std::shared_ptr<const Segment>& segment, const SegmentSignature& signature, const CachedLowering& cached,
                            size_t workers) {
  const auto& nodes = segment->nodes;
  for (uint32_t i : cached.syncs) {
    nodes[i].completion->remaining.store(static_cast<int>(workers));
    if (workers == 0) nodes[i].completion->deliver(FetchResult{});
  }
  for (const auto& [worker, kernels] : cached.batches) {
    KernelBatch batch;
    batch.segment = segment;
    batch.signature = signature;
    batch.kernels.reserve(kernels.size());
    for (const CachedKernel& c : kernels) {
      Kernel& k = batch.kernels.emplace_back(c.kernel);
      if (c.node != CachedKernel::kNone) k.node = &nodes[c.node];
      if (c.release != CachedKernel::kNone) k.id = nodes[c.release].outputs[0];
    }
    worker->push(std::move(batch));
  }
}

void Controller::lower(const std::shared_ptr<const Segment>& segment, const SegmentSignature& signature, bool repeat) {
  // a repeat lowered before with the same key gets the same kernels, rebound to its nodes
  const size_t workers = repeat ? workers_.count() : 0;
  const uint64_t key = repeat ? loweringKey(*segment, signature, workers) : 0;
  if (repeat) {
    if (const CachedLowering* cached = lowerings_.find(key)) {
      lowerAgain(segment, signature, *cached, workers);
      reusedLowerings_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  const SegmentPlan rewrite = plan(*segment, *scratch_);
  std::unordered_map<Worker*, KernelBatch> batches;
  // A rank on another node of a cluster has no worker here (null): that node lowers it.
  auto queue = [&](Worker* worker, const Kernel& kernel) {
    if (!worker) return;
    auto& batch = batches[worker];
    if (!batch.segment) {
      batch.segment = segment;
      batch.signature = signature;
      batch.kernels.reserve(segment->nodes.size() + 8);
    }
    batch.kernels.push_back(kernel);
  };
  // A free goes to every rank of the tensor's mesh, which the client recorded on the node.
  auto emitFrees = [&](const std::vector<const Node*>& releases) {
    for (const Node* rel : releases) {
      const auto& ranks = workers_.workersOf(rel->meshId);
      for (size_t r = 0; r < ranks.size(); ++r) {
        queue(ranks[r], Kernel{Kernel::Kind::kFree, static_cast<int>(r), nullptr, nullptr, rel->outputs[0]});
      }
    }
  };

  emitFrees(rewrite.freeAfter[0]);
  const auto& nodes = segment->nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    switch (node.kind) {
      case NodeKind::kCompute: {
        if (rewrite.dead[i]) break;
        if (node.op->receivesFromInputMesh) {  // input ranks send before the output ranks receive
          const auto& senders = workers_.workersOf(node.inputMeshId);
          const size_t count = node.op->sendsFromEveryInputRank ? senders.size() : 1;
          for (size_t r = 0; r < count; ++r) {
            queue(senders[r], Kernel{Kernel::Kind::kSend, static_cast<int>(r), &node, nullptr, 0});
          }
        }
        const DeviceMesh& mesh = meshes_.get(node.meshId);
        const auto& ranks = workers_.workersOf(node.meshId);
        for (int r = 0; r < mesh.size(); ++r) {
          queue(ranks[r], Kernel{Kernel::Kind::kRun, r, &node, &mesh, 0, rewrite.reuseInput[i], rewrite.markMade[i]});
        }
        break;
      }
      case NodeKind::kFetch: {
        // Replicate: every rank holds the full value; rank 0 answers (on its node, in a cluster).
        const DeviceMesh& mesh = meshes_.get(node.meshId);
        queue(workers_.workersOf(node.meshId)[0], Kernel{Kernel::Kind::kFetch, 0, &node, &mesh, 0});
        break;
      }
      case NodeKind::kSync: {
        const auto all = workers_.all();
        node.completion->remaining.store(static_cast<int>(all.size()));
        if (all.empty()) node.completion->deliver(FetchResult{});
        for (Worker* w : all) queue(w, Kernel{Kernel::Kind::kSync, 0, &node, nullptr, 0});
        break;
      }
      case NodeKind::kRelease: break;  // placed by the plan
    }
    emitFrees(rewrite.freeAfter[i + 1]);
  }
  if (repeat) {  // kept for the next time this segment comes (the first repeat is lowered as new)
    CachedLowering cached;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].kind == NodeKind::kSync) cached.syncs.push_back(static_cast<uint32_t>(i));
      if (nodes[i].kind == NodeKind::kRelease) scratch_->releaseIndex.put(nodes[i].outputs[0], static_cast<int>(i));
    }
    for (const auto& [worker, batch] : batches) {
      auto& kernels = cached.batches.emplace_back(worker, std::vector<CachedKernel>()).second;
      kernels.reserve(batch.kernels.size());
      for (const Kernel& k : batch.kernels) {
        CachedKernel& c = kernels.emplace_back(CachedKernel{k});
        if (k.node) c.node = static_cast<uint32_t>(k.node - nodes.data());
        if (k.kind == Kernel::Kind::kFree) c.release = static_cast<uint32_t>(*scratch_->releaseIndex.find(k.id));
        c.kernel.node = nullptr;
        c.kernel.id = 0;
      }
    }
    scratch_->releaseIndex.clear();
    lowerings_.put(key, std::move(cached));
  }
  for (auto& [worker, batch] : batches) worker->push(std::move(batch));
  DTORCH_LOG(common::LogLevel::kDebug, "controller lowered a segment of " << nodes.size() << " nodes to "
                                                                          << batches.size() << " workers");
}

}  // namespace dtorch::core
