#include "external/cuda/cuda_graph.h"

#include <stdexcept>

#include "common/error.h"
#include "external/cuda/cuda_memory.h"

#ifdef DTORCH_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace {
// The graph pool of this worker thread. It lives while a graph captured into it does (each holds
// a use of it, released with the graph); once none does, the allocator may free it, and may not
// be asked to share it again: the next capture starts a new one.
struct WorkerPool {
  c10::MempoolId_t id{0, 0};
  int graphs = 0;  // graphs alive that were captured into it
};
thread_local WorkerPool workerPool;
}  // namespace

struct CapturedGraph::Impl {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

struct GraphCapture::State {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  c10::MempoolId_t pool;
  c10::DeviceIndex device = 0;
  int64_t reservedBefore = 0;
  bool ended = false;
};

bool canCapture() {
  return c10::cuda::device_count() > 0 && c10::cuda::getCurrentCUDAStream() != c10::cuda::getDefaultCUDAStream();
}

CapturedGraph::CapturedGraph(std::unique_ptr<Impl> impl, int64_t poolBytes) : impl_(std::move(impl)), poolBytes_(poolBytes) {}
CapturedGraph::~CapturedGraph() {
  impl_.reset();  // the graph's reset releases its use of the pool
  --workerPool.graphs;  // graphs are dropped on the thread that captured them
}

void CapturedGraph::replay() { impl_->graph->replay(); }

GraphCapture::GraphCapture() : state_(std::make_unique<State>()) {
  if (!canCapture()) common::fail(common::code::kInternal, "a CUDA graph can only be captured on a CUDA worker thread");
  if (workerPool.graphs == 0) workerPool.id = at::cuda::graph_pool_handle();
  state_->pool = workerPool.id;
  state_->device = c10::cuda::current_device();
  state_->reservedBefore = memoryStats(state_->device).reservedBytes;
  state_->graph = std::make_unique<at::cuda::CUDAGraph>();
  // thread-local: the other workers' CUDA calls go on meanwhile; this thread's unsafe ones fail
  state_->graph->capture_begin(state_->pool, cudaStreamCaptureModeThreadLocal);
}

namespace {

// An empty capture is legal (a span whose ops launch no kernel on this device, or one abandoned
// before its first kernel: a program that fails while loading) and replays as nothing; c10 warns
// of it on stderr, which would break a command's one-line error. Other warnings pass on. c10's
// handler is per thread, so the guard holds for this worker's capture_end alone.
class EmptyGraphWarningFilter final : public c10::WarningHandler {
 public:
  explicit EmptyGraphWarningFilter(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("CUDA Graph is empty") == std::string::npos) next_->process(warning);
  }

 private:
  c10::WarningHandler* next_;
};

// Ends the capture of `state`, leaving no routing to the pool behind; throws if it failed.
void endCapture(GraphCapture::State& state) {
  EmptyGraphWarningFilter filter(c10::WarningUtils::get_warning_handler());
  c10::WarningUtils::WarningHandlerGuard quiet(&filter);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  (void)cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(), &status);
  if (status == cudaStreamCaptureStatusActive) {
    state.graph->capture_end();  // a failure past this point is undone by the graph's own reset
    return;
  }
  // Invalidated (an unsafe call was made): capture_end fails at cudaStreamEndCapture, which ends
  // the capture, but before it stops the allocator routing to the pool and gives up its use.
  try {
    state.graph->capture_end();
  } catch (const std::exception&) {
  }
  (void)cudaGetLastError();  // the invalidation must not surface as a later kernel's error
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(state.device, state.pool);
    c10::cuda::CUDACachingAllocator::releasePool(state.device, state.pool);
  } catch (const std::exception&) {
  }
  common::fail(common::code::kInternal, "the capture was invalidated by a call CUDA graphs do not allow");
}

}  // namespace

GraphCapture::~GraphCapture() {
  if (!state_ || state_->ended) return;
  try {
    endCapture(*state_);  // abandoned: what it recorded is dropped with the graph
  } catch (const std::exception&) {
  }
  state_->graph.reset();
}

std::unique_ptr<CapturedGraph> GraphCapture::finish() {
  state_->ended = true;
  endCapture(*state_);
  auto impl = std::make_unique<CapturedGraph::Impl>();
  impl->graph = std::move(state_->graph);
  ++workerPool.graphs;
  const int64_t grown = memoryStats(state_->device).reservedBytes - state_->reservedBefore;
  return std::unique_ptr<CapturedGraph>(new CapturedGraph(std::move(impl), grown > 0 ? grown : 0));
}


#else  // no CUDA: nothing is ever captured

struct CapturedGraph::Impl {};
struct GraphCapture::State {};

bool canCapture() { return false; }
CapturedGraph::CapturedGraph(std::unique_ptr<Impl> impl, int64_t poolBytes) : impl_(std::move(impl)), poolBytes_(poolBytes) {}
CapturedGraph::~CapturedGraph() = default;
void CapturedGraph::replay() {}
GraphCapture::GraphCapture() { common::fail(common::code::kInternal, "this build has no CUDA: nothing can be captured"); }
GraphCapture::~GraphCapture() = default;
std::unique_ptr<CapturedGraph> GraphCapture::finish() { return nullptr; }

#endif

}  // namespace dtorch::external::cuda
