// CUDA graphs on a worker thread: work queued on its compute stream is captured once and replayed
// with one launch. Every graph of one worker captures into the same private memory pool of the
// caching allocator: they replay one at a time on that one stream, and whatever a graph hands
// out is copied out of the pool right after its replay, so one graph's scratch memory may be
// another's. LibTorch's at::cuda::CUDAGraph does the capture (it keeps the allocator's and the
// generators' bookkeeping right); this file adds what a worker needs around it: capture confined
// to this thread (other workers go on meanwhile), and a failed capture undone completely.
// In a build without CUDA nothing can be captured (canCapture() is false).
#pragma once
#include <cstdint>
#include <memory>

namespace dtorch::external::cuda {

// Whether this thread can capture: a CUDA build, on a bound CUDA worker thread.
bool canCapture();

class CapturedGraph {
 public:
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  // Launches the captured work on this thread's current stream.
  void replay();
  // Device memory the pool grew by while this graph was captured.
  int64_t poolBytes() const { return poolBytes_; }

 private:
  friend class GraphCapture;
  struct Impl;
  CapturedGraph(std::unique_ptr<Impl> impl, int64_t poolBytes);
  std::unique_ptr<Impl> impl_;
  int64_t poolBytes_ = 0;
};

// Captures what this thread queues on its current stream from construction to finish(): the
// kernels are recorded, not run, and every allocation on the stream comes from the worker's
// graph pool. Destroyed unfinished (a kernel threw), the capture is abandoned: the stream leaves
// capture mode and the allocator routes nothing to the pool any more.
class GraphCapture {
 public:
  GraphCapture();  // throws unless canCapture()
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;
  // Ends the capture; throws if it failed (something queued could not be captured).
  std::unique_ptr<CapturedGraph> finish();
  struct State;  // cuda_graph.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace dtorch::external::cuda
