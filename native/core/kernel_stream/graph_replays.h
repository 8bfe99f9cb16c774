// GraphReplays: a CUDA worker's CUDA graphs of the work it is handed again and again (DESIGN
// §2.3). A batch of a segment the controller signed (segment_signature.h) is cut into spans:
// runs of compute kernels a graph can hold (no collective, no transfer, nothing computed on the
// host), with the frees between them. The first time a span is seen it runs kernel by kernel;
// the next time it is captured once as a CUDA graph (external/cuda/cuda_graph.h) and from then on
// replayed with one launch.
//
// A span's inputs from outside it are of two kinds, told apart by when they were made: fixed
// (made before the span first ran: weights, the prompt's embeddings), which the graph reads where
// they are and holds while it lives; and changing (made since: the latents of each step, the
// previous span's output), copied into the graph's own buffers before each replay. A span met
// with other fixed tensors (the same layers with other weights, a later step's rotary tables)
// gets a graph of its own.
// The tensors a span hands on are copied out of the graph's pool after each replay, so nothing
// the program holds is ever overwritten by a later replay. A graph goes when a fixed input is
// freed, when its span is the least recently used of kCapacity, or when it no longer matches.
// A span whose capture fails (an op CUDA graphs cannot hold) runs kernel by kernel from then on,
// so a kernel's failure is reported by that kernel, naming its op, as without graphs.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/id_map.h"
#include "core/blob/blob_table.h"
#include "core/kernel/kernel.h"

namespace dtorch::core {

// A worker's graph counters, read by any thread (dt.graph.stats, dt.memory).
struct GraphCounters {
  std::atomic<int64_t> captured{0};        // graphs captured
  std::atomic<int64_t> replays{0};         // spans run from a graph (its capture's first run included)
  std::atomic<int64_t> replayedKernels{0}; // their compute kernels
  std::atomic<int64_t> fallbacks{0};       // captures that failed, and graphs that no longer matched
  std::atomic<int64_t> bytes{0};           // device memory the live graphs hold (pool growth, input buffers)
  std::atomic<int64_t> live{0};            // graphs alive now
};

class GraphReplays {
 public:
  static constexpr int kMinKernels = 4;       // shorter spans run as they are: a replay's fixed costs exceed their launches
  static constexpr size_t kCapacity = 256;    // spans remembered per worker (the least recently run are forgotten)
  static constexpr size_t kMaxVariants = 64;  // graphs of one span (with different fixed inputs: layers alike)
  // A span whose replay would copy more than DTORCH_GRAPH_COPY_LIMIT_MB (16) in and out runs
  // kernel by kernel: its kernels are large enough that launching them is not what it costs, and
  // the copies in and out of a graph's buffers would cost more time and memory than the launches
  // they save (docs/engine.md, "CUDA graphs").
  static int64_t maxCopiedBytes();
  // Such a span's runs of small kernels (each making at most kSmallOutputBytes) are captured on
  // their own, as pieces, when their replay copies at most kPieceCopyBytes: the launch-bound
  // preamble of a diffusion step (timestep embedding, pooled projections) between its large
  // kernels. The large kernels between them run one by one.
  static constexpr int64_t kSmallOutputBytes = 256 << 10;
  static constexpr int64_t kPieceCopyBytes = 1 << 20;

  GraphReplays(const Device& device, GraphCounters& counters);
  ~GraphReplays();
  GraphReplays(const GraphReplays&) = delete;
  GraphReplays& operator=(const GraphReplays&) = delete;

  // Whether this worker can capture at all (a CUDA worker thread of a CUDA build).
  bool active() const { return active_; }
  // The spans of `batch` worth a graph, as [begin, end) kernel ranges in order (a span known to
  // copy too much gives its pieces instead).
  void findSpans(const KernelBatch& batch, std::vector<std::pair<size_t, size_t>>& spans);
  // Runs kernels [begin, end) of `batch` from a graph, capturing one if this span was seen
  // before; returns the compute kernels that ran, or -1 when the caller must run them one by one.
  int run(const KernelBatch& batch, size_t begin, size_t end, BlobTable& blobs);
  // Tensor `id` was freed: the graphs that read it as a fixed input can never run again.
  void released(int64_t id) {
    if (!fixedUsers_.empty()) dropUsersOf(id);
  }
  // Drops every graph (the worker is ending, or graphs were turned off).
  void clear();

  struct Layout;
  struct Graph;
  struct Span;

 private:
  void analyse(const KernelBatch& batch, size_t begin, size_t end);
  static uint64_t keyOf(const KernelBatch& batch, size_t begin, size_t end);
  Span& spanAt(uint64_t key);
  void findPieces(const KernelBatch& batch, size_t begin, size_t end, Span& span);
  void replay(Graph& graph, BlobTable& blobs);
  bool capture(uint64_t key, Span& span, const KernelBatch& batch, size_t begin, size_t end, BlobTable& blobs);
  void dropGraph(Span& span, size_t index);
  void dropUsersOf(int64_t id);
  void forgetLeastRecent();

  Device device_;
  GraphCounters& counters_;
  bool active_ = false;
  uint64_t clock_ = 0;
  std::unique_ptr<Layout> layout_;  // the span being run, reused
  std::unordered_map<uint64_t, std::unique_ptr<Span>> spans_;
  std::unordered_map<int64_t, std::vector<std::pair<uint64_t, const Graph*>>> fixedUsers_;  // by tensor id
};

}  // namespace dtorch::core
