// Controller: the native thread between the client and the workers. It takes recorded
// segments in order, rewrites them (fuses producer-consumer pairs, drops dead nodes, frees each
// released tensor right after its last use), lowers every node to one kernel per rank, and queues the kernels on the
// ranks' workers, one batch per worker per segment.
#pragma once
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/work_queue.h"
#include "core/graph/segment_sink.h"
#include "core/kernel_stream/worker_pool.h"
#include "core/operand/mesh_table.h"
#include "core/runner/fusion.h"
#include "core/runner/lowering_cache.h"
#include "core/runner/repeated_segments.h"

namespace dtorch::core {

class Controller final : public SegmentSink {
 public:
  Controller(const MeshTable& meshes, WorkerPool& workers);
  ~Controller();
  void submit(std::shared_ptr<Segment> segment) override;
  std::shared_ptr<Segment> takeSpare() override;
  void stop();
  // What the controller recognised of the segments it lowered (any thread).
  RepeatStats repeatStats() const {
    RepeatStats stats = repeats_.stats();
    stats.reusedLowerings = reusedLowerings_.load(std::memory_order_relaxed);
    return stats;
  }
  // Recognising (and so replaying) repeated segments: as DTORCH_GRAPHS says until switched (any thread).
  void setGraphs(bool on) { graphsSwitched_.store(on ? 1 : 0, std::memory_order_relaxed); }
  bool graphs() const {
    const int switched = graphsSwitched_.load(std::memory_order_relaxed);
    return switched < 0 ? common::settings().graphs : switched == 1;
  }
  struct PlanScratch;

 private:
  void loop();
  // `repeat`: the signature was seen before, so a lowering of it may be cached (lowering_cache.h).
  void lower(const std::shared_ptr<const Segment>& segment, const SegmentSignature& signature, bool repeat);
  // Queues a cached lowering's kernels rebound to `segment`'s nodes; its syncs wait for `workers`
  // (the count its key holds).
  void lowerAgain(const std::shared_ptr<const Segment>& segment, const SegmentSignature& signature, const CachedLowering& cached,
                  size_t workers);
  // Drops lowered segments no worker holds any more, so their nodes are destroyed here rather
  // than on a worker's hot path.
  void sweepRetired();

  const MeshTable& meshes_;
  WorkerPool& workers_;
  std::unique_ptr<PlanScratch> scratch_;  // controller thread only
  SegmentFusion fusion_;                  // controller thread only
  RepeatedSegments repeats_;              // noted on the controller thread
  LoweringCache lowerings_;               // controller thread only
  std::atomic<int64_t> reusedLowerings_{0};
  std::atomic<int> graphsSwitched_{-1};  // -1: not switched; the settings are read lazily, once checked
  common::WorkQueue<std::shared_ptr<Segment>> queue_;
  std::deque<std::shared_ptr<Segment>> retired_;  // controller thread only
  std::mutex spareMutex_;
  std::vector<std::shared_ptr<Segment>> spare_;  // under spareMutex_
  static constexpr size_t kMaxSpare = 4;
  std::thread thread_;
};

}  // namespace dtorch::core
