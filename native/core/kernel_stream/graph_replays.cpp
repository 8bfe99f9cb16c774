#include "core/kernel_stream/graph_replays.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "common/env.h"
#include "common/log.h"
#include "common/word_hash.h"
#include "core/operators/op.h"
#include "external/cuda/cuda_graph.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {

namespace {

// A node a CUDA graph can hold: its kernel only queues work on the worker's compute stream.
bool capturable(const Kernel& k) {
  if (k.kind != Kernel::Kind::kRun) return false;
  const Node& node = *k.node;
  return !node.state && !node.op->communicates && !node.op->receivesFromInputMesh && !node.op->hostSide &&
         !node.hostData.defined();
}

// Calls emit(begin, end, computeKernels) for each run in [begin, end) of `kernels` that starts at a
// kernel `fits` takes (a compute kernel) and goes on through the frees and such kernels after it.
template <typename Fits, typename Emit>
void forEachRun(const std::vector<Kernel>& kernels, size_t begin, size_t end, Fits fits, Emit emit) {
  size_t i = begin;
  while (i < end) {
    if (!fits(kernels[i])) {
      ++i;
      continue;
    }
    size_t stop = i;
    int compute = 0;
    while (stop < end && (kernels[stop].kind == Kernel::Kind::kFree || fits(kernels[stop]))) {
      compute += kernels[stop].kind == Kernel::Kind::kRun;
      ++stop;
    }
    emit(i, stop, compute);
    i = stop;
  }
}

}  // namespace

// What one occurrence of a span reads and hands on, found by walking its kernels.
struct GraphReplays::Layout {
  uint64_t structure = 0;             // the kernels' nodes and ranks, and where tensors made here are freed
  std::vector<int64_t> inputs;        // tensors from outside the span, in order of first use
  std::vector<int64_t> outputs;       // tensors made here and not freed here, in order made
  std::vector<bool> outputMarked;     // a communicating op later in the segment reads it
  std::vector<const TensorMeta*> outputMetas;  // its whole tensor's meta (an upper bound of the piece here)
  std::vector<int64_t> outsideFrees;  // frees of tensors from outside, done after the span runs
  int computeKernels = 0;
  const Node* firstNode = nullptr;    // of its first compute kernel (a failed replay names it)
  common::IdMap<int> made{64};        // id -> output slot (-1: freed in the span)
  common::IdMap<char> seen{64};       // outside inputs already listed
};

// One captured graph of a span.
struct GraphReplays::Graph {
  std::unique_ptr<external::cuda::CapturedGraph> graph;
  std::vector<int64_t> fixedIds;      // per input slot: the tensor read in place (0: a changing input)
  std::vector<int64_t> copiedIds;     // per changing input slot: the tensor its buffer holds now
  std::vector<at::Tensor> inputs;     // per input slot: the fixed tensor, or the buffer copied into
  std::vector<at::Tensor> outputs;    // per output slot, in the pool: valid until the next replay
  int64_t bytes = 0;
  uint64_t lastUse = 0;
};

struct GraphReplays::Span {
  uint64_t structure = 0;
  bool eager = false;  // a capture failed, or it copies too much: it runs kernel by kernel from now on
  bool piece = false;  // a run of small kernels inside a span that copies too much
  std::vector<std::pair<size_t, size_t>> pieces;  // of a span that copies too much: its runs of small kernels
  uint64_t lastUse = 0;
  bool seen = false;
  uint64_t firstBatch = 0;  // the worker's batch when it was first seen
  std::vector<std::unique_ptr<Graph>> graphs;
};

int64_t GraphReplays::maxCopiedBytes() {
  static const int64_t bytes = common::settings().graphCopyLimitMb << 20;
  return bytes;
}

GraphReplays::GraphReplays(const Device& device, GraphCounters& counters)
    : device_(device), counters_(counters), layout_(std::make_unique<Layout>()) {
  try {
    active_ = device.kind == DeviceKind::kCuda && external::cuda::canCapture();
  } catch (const std::exception& e) {  // a GPU this thread could not take: its kernels report that
    active_ = false;
  }
}

GraphReplays::~GraphReplays() { clear(); }

void GraphReplays::clear() {
  for (auto& [key, span] : spans_) {
    while (!span->graphs.empty()) dropGraph(*span, span->graphs.size() - 1);
  }
  spans_.clear();
  fixedUsers_.clear();
}

uint64_t GraphReplays::keyOf(const KernelBatch& batch, size_t begin, size_t end) {
  common::WordHash key;  // the segment, and where in its batch the span lies
  key.add(batch.signature.hash);
  key.add(batch.signature.check);
  key.add(begin);
  key.add(end);
  return key.value();
}

GraphReplays::Span& GraphReplays::spanAt(uint64_t key) {
  auto found = spans_.find(key);
  if (found == spans_.end()) {
    if (spans_.size() >= kCapacity) forgetLeastRecent();
    found = spans_.emplace(key, std::make_unique<Span>()).first;
    found->second->lastUse = ++clock_;  // not the next to be forgotten
  }
  return *found->second;
}

void GraphReplays::findSpans(const KernelBatch& batch, std::vector<std::pair<size_t, size_t>>& spans) {
  spans.clear();
  forEachRun(batch.kernels, 0, batch.kernels.size(), capturable, [&](size_t begin, size_t end, int compute) {
    if (compute < kMinKernels) return;
    auto known = spans_.find(keyOf(batch, begin, end));
    if (known == spans_.end() || known->second->pieces.empty()) {
      spans.emplace_back(begin, end);
      return;
    }
    Span& whole = *known->second;
    whole.lastUse = ++clock_;  // remembered while its pieces run
    for (const auto& [b, e] : whole.pieces) {
      spanAt(keyOf(batch, b, e)).piece = true;
      spans.emplace_back(b, e);
    }
  });
}

void GraphReplays::analyse(const KernelBatch& batch, size_t begin, size_t end) {
  Layout& l = *layout_;
  common::WordHash structure;
  l.inputs.clear();
  l.outputs.clear();
  l.outputMarked.clear();
  l.outputMetas.clear();
  l.outsideFrees.clear();
  l.computeKernels = 0;
  l.firstNode = nullptr;
  l.made.clear();
  l.seen.clear();
  const Node* first = batch.segment->nodes.data();
  for (size_t i = begin; i < end; ++i) {
    const Kernel& k = batch.kernels[i];
    if (k.kind == Kernel::Kind::kRun) {
      const Node& node = *k.node;
      if (!l.firstNode) l.firstNode = &node;
      structure.add(static_cast<uint64_t>(&node - first));
      structure.add(static_cast<uint64_t>(k.rank));
      for (int64_t id : node.inputs) {
        if (!l.made.contains(id) && !l.seen.contains(id)) {
          l.seen.put(id, 1);
          l.inputs.push_back(id);
        }
      }
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        l.made.put(node.outputs[o], static_cast<int>(l.outputs.size()));
        l.outputs.push_back(node.outputs[o]);
        l.outputMarked.push_back(k.markMade);
        l.outputMetas.push_back(&node.outputMetas[o]);
      }
      ++l.computeKernels;
    } else {  // a free
      if (int* slot = l.made.find(k.id)) {
        structure.add(~static_cast<uint64_t>(*slot));
        l.outputs[*slot] = 0;  // not handed on
      } else {
        l.outsideFrees.push_back(k.id);
      }
    }
  }
  // keep the outputs handed on, in order
  size_t kept = 0;
  for (size_t i = 0; i < l.outputs.size(); ++i) {
    if (l.outputs[i] == 0) continue;
    l.outputs[kept] = l.outputs[i];
    l.outputMarked[kept] = l.outputMarked[i];
    l.outputMetas[kept] = l.outputMetas[i];
    ++kept;
  }
  l.outputs.resize(kept);
  l.outputMarked.resize(kept);
  l.outputMetas.resize(kept);
  l.structure = structure.value();
}

int GraphReplays::run(const KernelBatch& batch, size_t begin, size_t end, BlobTable& blobs) {
  if (!active_ || batch.signature.nodes == 0) return -1;
  analyse(batch, begin, end);
  const Layout& l = *layout_;
  // every input must be here and healthy: an upstream failure flows through kernel by kernel
  for (int64_t id : l.inputs) {
    const Blob* blob = blobs.find(id);
    if (!blob || blob->error || !blob->tensor.defined() || !blob->tensor.is_cuda()) return -1;
  }
  const uint64_t key = keyOf(batch, begin, end);
  Span& span = spanAt(key);
  if (span.structure != l.structure) {  // another lowering of the same segment: start over
    while (!span.graphs.empty()) dropGraph(span, span.graphs.size() - 1);
    span.seen = false;
    span.eager = false;
    span.pieces.clear();
    span.structure = l.structure;
  }
  span.lastUse = ++clock_;
  if (span.eager) return -1;

  // a graph whose fixed inputs are the ones read now
  for (auto& graph : span.graphs) {
    bool matches = true;
    for (size_t s = 0; s < l.inputs.size() && matches; ++s) matches = graph->fixedIds[s] == 0 || graph->fixedIds[s] == l.inputs[s];
    if (!matches) continue;
    graph->lastUse = clock_;
    replay(*graph, blobs);  // may drop the graph itself (a fixed input's last use): not touched after
    return l.computeKernels;
  }

  // none: capture one, once the span was seen before. Inputs made before its first run (weights,
  // the prompt's embeddings) are read in place; those made since (this step's latents, the
  // previous span's output) are copied in before each replay.
  if (!span.seen) {
    span.seen = true;
    span.firstBatch = external::cuda::batchesEnded();
    return -1;  // first seen: it runs as it is
  }
  std::vector<int64_t> fixedIds(l.inputs.size(), 0);
  int64_t copied = 0;  // what each replay would copy in and out
  size_t copies = l.outputs.size();
  for (size_t s = 0; s < l.inputs.size(); ++s) {
    const Blob* blob = blobs.find(l.inputs[s]);
    if (blob->batch < span.firstBatch) {
      fixedIds[s] = l.inputs[s];
    } else {
      copied += static_cast<int64_t>(blob->tensor.nbytes());
      ++copies;
    }
  }
  for (const TensorMeta* meta : l.outputMetas) copied += meta->nbytes();
  if (copied > (span.piece ? std::min(maxCopiedBytes(), kPieceCopyBytes) : maxCopiedBytes())) {
    span.eager = true;  // its kernels are large: launches are not what it costs
    if (!span.piece) findPieces(batch, begin, end, span);
    return -1;
  }
  // a piece whose copies in and out would be about as many launches as the kernels it holds (an
  // adaLN linear and the chunks a block reads later) runs as it is
  if (span.piece && static_cast<size_t>(l.computeKernels) < kMinKernels + copies) {
    span.eager = true;
    return -1;
  }
  if (span.graphs.size() >= kMaxVariants) {
    size_t oldest = 0;
    for (size_t g = 1; g < span.graphs.size(); ++g) oldest = span.graphs[g]->lastUse < span.graphs[oldest]->lastUse ? g : oldest;
    dropGraph(span, oldest);
  }
  auto graph = std::make_unique<Graph>();
  graph->fixedIds = std::move(fixedIds);
  span.graphs.push_back(std::move(graph));
  if (!capture(key, span, batch, begin, end, blobs)) {
    span.graphs.pop_back();
    span.eager = true;
    counters_.fallbacks.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  replay(*span.graphs.back(), blobs);  // this occurrence's own run: the capture only recorded it
  return l.computeKernels;
}

// The runs in [begin, end) of at least kMinKernels compute kernels that each make at most
// kSmallOutputBytes (with the frees among them), unless that is the whole span.
void GraphReplays::findPieces(const KernelBatch& batch, size_t begin, size_t end, Span& span) {
  span.pieces.clear();
  const auto small = [](const Kernel& k) {
    if (k.kind != Kernel::Kind::kRun) return false;
    int64_t bytes = 0;
    for (const TensorMeta& meta : k.node->outputMetas) bytes += meta.nbytes();
    return bytes <= kSmallOutputBytes;
  };
  forEachRun(batch.kernels, begin, end, small, [&](size_t b, size_t e, int compute) {
    if (compute >= kMinKernels && (b != begin || e != end)) span.pieces.emplace_back(b, e);
  });
}

bool GraphReplays::capture(uint64_t key, Span& span, const KernelBatch& batch, size_t begin, size_t end, BlobTable& blobs) {
  const Layout& l = *layout_;
  Graph& g = *span.graphs.back();
  g.copiedIds.assign(l.inputs.size(), 0);
  g.inputs.resize(l.inputs.size());
  // The capture runs against a table of its own: the worker's blobs stay as they were, so a
  // failed capture leaves everything for the kernel-by-kernel run.
  std::atomic<int64_t> scratchBytes{0}, scratchPeak{0};
  BlobTable scratch(scratchBytes, scratchPeak);
  int64_t bufferBytes = 0;
  try {
    for (size_t s = 0; s < l.inputs.size(); ++s) {
      const at::Tensor& t = settledBlob(blobs, l.inputs[s])->tensor;
      if (g.fixedIds[s] != 0) {
        g.inputs[s] = t;
      } else {
        // the same layout where it can be had, so the kernels captured see what they saw eagerly
        g.inputs[s] = t.is_non_overlapping_and_dense() ? at::empty_strided(t.sizes(), t.strides(), t.options()) : at::empty_like(t, at::MemoryFormat::Contiguous);
        g.inputs[s].copy_(t);
        g.copiedIds[s] = l.inputs[s];
        bufferBytes += static_cast<int64_t>(g.inputs[s].nbytes());
      }
      scratch.put(l.inputs[s], Blob{g.inputs[s], nullptr, nullptr, nullptr, 0, nullptr});
    }
    external::cuda::GraphCapture capturing;
    for (size_t i = begin; i < end; ++i) {
      const Kernel& k = batch.kernels[i];
      if (k.kind == Kernel::Kind::kFree) {
        scratch.erase(k.id);
        continue;
      }
      Kernel quiet = k;
      quiet.markMade = false;  // an event recorded inside a capture means nothing outside it
      executeKernel(quiet, scratch, device_);
      const Blob* out = k.node->outputs.empty() ? nullptr : scratch.find(k.node->outputs[0]);
      if (out && out->error) {
        common::fail(common::code::kInternal, std::string(k.node->op->name) + " could not be captured: " + out->error->message);
      }
    }
    g.graph = capturing.finish();
    g.outputs.resize(l.outputs.size());
    for (size_t o = 0; o < l.outputs.size(); ++o) g.outputs[o] = scratch.find(l.outputs[o])->tensor;
  } catch (const std::exception& e) {
    // the first time on this worker as a warning (graphs are a large part of the speed), then quietly
    DTORCH_LOG(counters_.fallbacks.load(std::memory_order_relaxed) == 0 ? common::LogLevel::kWarn : common::LogLevel::kDebug,
               "worker " << device_.name() << ": a span of " << l.computeKernels
                         << " kernels runs without a CUDA graph (DTORCH_GRAPHS=0 turns graphs off): " << errorText(e));
    g.graph.reset();
    return false;
  }
  g.bytes = g.graph->poolBytes() + bufferBytes;
  g.lastUse = clock_;
  counters_.captured.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes.fetch_add(g.bytes, std::memory_order_relaxed);
  counters_.live.fetch_add(1, std::memory_order_relaxed);
  for (int64_t id : g.fixedIds) {
    if (id != 0) fixedUsers_[id].emplace_back(key, &g);
  }
  return true;
}

// Runs `g` on this occurrence's inputs, hands its outputs on (copied out of the pool, which the
// next replay reuses), then does the span's frees of outside tensors, now that the work reading
// them is queued (which may drop `g` itself: it is not touched after). A copy or a launch that
// fails rejects what the span makes, naming its first op, as a failed kernel does.
void GraphReplays::replay(Graph& g, BlobTable& blobs) {
  const Layout& l = *layout_;
  try {
    for (size_t s = 0; s < l.inputs.size(); ++s) {
      const Blob* blob = settledBlob(blobs, l.inputs[s]);
      // a tensor never changes, and the graph never writes its input buffers: the same tensor as
      // last time (a weight made after the span first ran) is there already
      if (g.fixedIds[s] != 0 || g.copiedIds[s] == l.inputs[s]) continue;
      g.copiedIds[s] = 0;
      g.inputs[s].copy_(blob->tensor);
      g.copiedIds[s] = l.inputs[s];
    }
    g.graph->replay();
    const uint64_t batch = external::cuda::batchesEnded();
    for (size_t o = 0; o < l.outputs.size(); ++o) {
      at::Tensor out = g.outputs[o].clone();
      std::shared_ptr<void> made = l.outputMarked[o] ? external::cuda::markReady(out) : nullptr;
      blobs.put(l.outputs[o], Blob{std::move(out), nullptr, nullptr, nullptr, batch, std::move(made)});
    }
  } catch (const std::exception& e) {
    const Node& first = *l.firstNode;
    auto error = std::make_shared<const KernelError>(KernelError{
        std::string(first.op->name), "the CUDA graph running it and the next " + std::to_string(l.computeKernels - 1) +
                                         " kernels failed (DTORCH_GRAPHS=0 runs them one by one): " + errorText(e),
        first.seq, common::code::kKernelFailed});
    DTORCH_LOG(common::LogLevel::kWarn, "worker " << device_.name() << ": " << error->message);
    for (int64_t id : l.outputs) blobs.put(id, Blob{at::Tensor(), error, nullptr, nullptr, external::cuda::kCurrentBatch, nullptr});
    counters_.fallbacks.fetch_add(1, std::memory_order_relaxed);
  }
  for (int64_t id : l.outsideFrees) {
    blobs.erase(id);
    released(id);
  }
  counters_.replays.fetch_add(1, std::memory_order_relaxed);
  counters_.replayedKernels.fetch_add(l.computeKernels, std::memory_order_relaxed);
}

void GraphReplays::dropGraph(Span& span, size_t index) {
  const Graph* g = span.graphs[index].get();
  for (int64_t id : g->fixedIds) {
    if (id == 0) continue;
    auto users = fixedUsers_.find(id);
    if (users == fixedUsers_.end()) continue;
    auto& list = users->second;
    list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& u) { return u.second == g; }), list.end());
    if (list.empty()) fixedUsers_.erase(users);
  }
  if (g->graph) {
    counters_.bytes.fetch_sub(g->bytes, std::memory_order_relaxed);
    counters_.live.fetch_sub(1, std::memory_order_relaxed);
  }
  span.graphs.erase(span.graphs.begin() + static_cast<std::ptrdiff_t>(index));
}

void GraphReplays::dropUsersOf(int64_t id) {
  auto users = fixedUsers_.find(id);
  if (users == fixedUsers_.end()) return;
  const auto list = users->second;  // dropGraph edits the index
  for (const auto& [key, graph] : list) {
    auto span = spans_.find(key);
    if (span == spans_.end()) continue;
    auto& graphs = span->second->graphs;
    for (size_t g = 0; g < graphs.size(); ++g) {
      if (graphs[g].get() == graph) {
        dropGraph(*span->second, g);
        break;
      }
    }
  }
}

void GraphReplays::forgetLeastRecent() {
  auto oldest = spans_.begin();
  for (auto it = spans_.begin(); it != spans_.end(); ++it) oldest = it->second->lastUse < oldest->second->lastUse ? it : oldest;
  while (!oldest->second->graphs.empty()) dropGraph(*oldest->second, oldest->second->graphs.size() - 1);
  spans_.erase(oldest);
}

}  // namespace dtorch::core
