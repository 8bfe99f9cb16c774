// Worker: the thread that owns one device. It runs the kernels the controller queues, in
// queue order, under InferenceMode, with its own intra-op thread count, against its blobs.
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/work_queue.h"
#include "core/blob/blob_table.h"
#include "core/kernel/kernel.h"
#include "core/kernel_stream/graph_replays.h"
#include "core/operand/mesh.h"

namespace dtorch::core {

class Worker {
 public:
  explicit Worker(Device device);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const Device& device() const { return device_; }
  void push(KernelBatch batch);
  // Intra-op threads for this worker's LibTorch calls; applied before its next batch.
  void setIntraOpThreads(int threads) { intraOpThreads_.store(threads); }
  int64_t allocatedBytes() const { return allocatedBytes_.load(std::memory_order_relaxed); }
  // Highest allocatedBytes since the last resetPeak().
  int64_t peakBytes() const { return peakBytes_.load(std::memory_order_relaxed); }
  void resetPeak() { peakBytes_.store(allocatedBytes(), std::memory_order_relaxed); }
  // Compute kernels this worker ran (dead nodes the controller dropped never count).
  int64_t kernelsRun() const { return kernelsRun_.load(std::memory_order_relaxed); }
  // What this worker's CUDA graphs did (graph_replays.h); all zero on CPU workers.
  const GraphCounters& graphs() const { return graphs_; }
  // Intra-op threads LibTorch reports on this worker's thread (0 before its first batch).
  int intraOpThreadsInUse() const { return threadsInUse_.load(std::memory_order_relaxed); }
  void stop();
  // Skips every kernel queued so far, the running batch's rest included (a worker node whose
  // cluster ended: that work's results have no reader, and its process must exit promptly).
  // What is queued later runs.
  void abandon();

 private:
  void loop();

  Device device_;
  common::WorkQueue<KernelBatch> queue_;  // numbers each batch (KernelBatch::number)
  // set once the thread has taken its GPU streams: the constructor waits for it, so no worker
  // is still starting when the program ends (a CUDA runtime shutting down under it)
  std::mutex startedMutex_;
  bool started_ = false;
  std::condition_variable startedCv_;
  std::atomic<int> intraOpThreads_{1};
  std::atomic<int64_t> allocatedBytes_{0};
  std::atomic<int> threadsInUse_{0};
  std::atomic<int64_t> peakBytes_{0};
  std::atomic<int64_t> kernelsRun_{0};
  GraphCounters graphs_;
  std::atomic<uint64_t> abandonedUpTo_{0};  // batches up to this number are skipped
  std::thread thread_;
};

}  // namespace dtorch::core
