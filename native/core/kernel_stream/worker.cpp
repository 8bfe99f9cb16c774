#include "core/kernel_stream/worker.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "common/env.h"
#include "common/log.h"
#include "core/communication/rendezvous.h"
#include "common/thread_name.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {

// A worker thread never lets an exception out (that would terminate the process): a CUDA runtime
// that fails under it (at process exit, the driver shutting down while the thread starts or
// drains) is logged, and the kernels behind it report their own errors to their readers.
Worker::Worker(Device device)
    : device_(device), thread_([this] {
        try {
          loop();
        } catch (const std::exception& e) {
          DTORCH_LOG(common::LogLevel::kError, "worker " << device_.name() << " stopped: " << e.what());
        } catch (...) {
          DTORCH_LOG(common::LogLevel::kError, "worker " << device_.name() << " stopped by an unknown exception");
        }
        {
          std::lock_guard<std::mutex> lock(startedMutex_);
          started_ = true;  // a thread that failed before it started does not keep its constructor waiting
        }
        startedCv_.notify_all();
      }) {
  std::unique_lock<std::mutex> lock(startedMutex_);
  if (!startedCv_.wait_for(lock, std::chrono::seconds(60), [this] { return started_; })) {
    DTORCH_LOG(common::LogLevel::kWarn, "worker " << device_.name() << " took more than 60 s to start; going on without waiting");
  }
}

Worker::~Worker() { stop(); }

void Worker::push(KernelBatch batch) {
  queue_.push(std::move(batch), [](KernelBatch& b, uint64_t number) { b.number = number; });
}

void Worker::abandon() { abandonedUpTo_.store(queue_.pushed(), std::memory_order_relaxed); }

void Worker::stop() {
  queue_.stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::loop() {
  common::setThreadName("dt-" + device_.name());  // shows in top/perf/gdb
  if (device_.kind == DeviceKind::kCuda) {
    try {
      external::cuda::bindWorkerThread(device_.index);  // its own stream
    } catch (const std::exception& e) {
      // the kernels then fail on their own CUDA calls, each reported to its readers
      DTORCH_LOG(common::LogLevel::kError, "worker " << device_.name() << " could not take its GPU streams: " << e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(startedMutex_);
    started_ = true;
  }
  startedCv_.notify_all();
  c10::InferenceMode inferenceMode;
  BlobTable blobs(allocatedBytes_, peakBytes_);
  GraphReplays replays(device_, graphs_);  // after the blobs: its graphs go first
  std::vector<std::pair<size_t, size_t>> spans;
  int appliedThreads = 0;
  std::deque<KernelBatch> batches;
  while (queue_.takeAll(batches)) {  // until stopped and drained
    const int threads = intraOpThreads_.load();
    if (threads != appliedThreads) {
      at::set_num_threads(threads);  // per-thread under OpenMP: this worker's parallel regions
      appliedThreads = threads;
      threadsInUse_.store(at::get_num_threads());
      DTORCH_LOG(common::LogLevel::kDebug, "worker " << device_.name() << " uses " << threads << " intra-op threads");
    }
    // a GPU worker stays at most this many batches ahead of its GPU (see endBatch)
    static const int inFlight = static_cast<int>(common::settings().cudaBatchesInFlight);
    int64_t runs = 0;
    for (const KernelBatch& batch : batches) {
      const bool dropped = batch.number <= abandonedUpTo_.load(std::memory_order_relaxed);
      spans.clear();
      if (replays.active() && batch.signature.nodes != 0 && !dropped) replays.findSpans(batch, spans);
      size_t nextSpan = 0;
      for (size_t i = 0; i < batch.kernels.size(); ++i) {
        if (nextSpan < spans.size() && spans[nextSpan].first == i) {
          const auto [begin, end] = spans[nextSpan++];
          const int ran = replays.run(batch, begin, end, blobs);
          if (ran >= 0) {
            runs += ran;
            i = end - 1;
            continue;
          }  // else kernel by kernel, below
        }
        const Kernel& kernel = batch.kernels[i];
        // the count is published before a sync or read answers, so a program that awaited one
        // sees every kernel queued before it
        if (kernel.kind == Kernel::Kind::kSync || kernel.kind == Kernel::Kind::kFetch) {
          kernelsRun_.fetch_add(runs, std::memory_order_relaxed);
          runs = 0;
        }
        if (batch.number <= abandonedUpTo_.load(std::memory_order_relaxed)) {
          static const auto why = std::make_shared<const KernelError>(
              KernelError{"", "its node left the cluster, and the work queued there was dropped", 0, common::code::kShutdown});
          cancelKernel(kernel, why);
          continue;
        }
        executeKernel(kernel, blobs, device_);
        runs += kernel.kind == Kernel::Kind::kRun;
        if (kernel.kind == Kernel::Kind::kFree) replays.released(kernel.id);
      }
      if (device_.kind == DeviceKind::kCuda && !external::cuda::endBatch(inFlight, collectiveTimeout())) {
        // the reads and syncs behind it report it (runSync's bounded drain); say so here too
        DTORCH_LOG(common::LogLevel::kWarn, "worker " << device_.name() << ": the GPU did not finish a batch within "
                                                      << collectiveTimeout().count() << " ms (DTORCH_COLLECTIVE_TIMEOUT_MS)");
      }
    }
    kernelsRun_.fetch_add(runs, std::memory_order_relaxed);
    batches.clear();
  }
  // pending reads deliver from the GPU's host callbacks: let them land before the engine goes
  if (device_.kind == DeviceKind::kCuda) {
    try {
      external::cuda::synchronizeThisThread(std::chrono::seconds(60));
    } catch (const std::exception& e) {
      DTORCH_LOG(common::LogLevel::kWarn, "worker " << device_.name() << " could not wait for its GPU at the end: " << e.what());
    }
  }
  replays.clear();
  blobs.clear();
}

}  // namespace dtorch::core
