// How worker threads on CUDA devices order their work with each other. Each CUDA worker owns two
// streams: a compute stream (its default) and a communication stream, on which collectives run
// so that they overlap the compute kernels queued after them. A tensor handed to another worker
// or stream travels with a "ready" marker (a CUDA event recorded where it was produced), which
// the consumer's stream waits for, and the consumer's stream is recorded on the tensor's memory
// so that the caching allocator does not reuse it before the consumer is done. No device-wide
// synchronisation. In a build without CUDA, and on CPU devices, all of it is a no-op.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace dtorch::external::cuda {

bool builtWithCuda();

// Binds the calling (worker) thread to CUDA device `index`, a compute stream of its own (made
// current) and a communication stream.
void bindWorkerThread(int index);

// A marker that the work queued so far on this thread's current stream (producing `t`) is done;
// nullptr for CPU tensors.
std::shared_ptr<void> markReady(const at::Tensor& t);

// Makes this thread's current stream wait for `ready` before it uses `t`, and keeps `t`'s memory
// alive for this stream. No-op for CPU tensors or a null marker.
void waitFor(const std::shared_ptr<void>& ready, const at::Tensor& t);

// How many batches this worker thread has ended (endBatch): the number of the batch it runs now.
// Work it queued in batch b < batchesEnded() is covered by that batch's end marker.
uint64_t batchesEnded();
// A batch number meaning "the batch running now" (or unknown): wait for everything queued.
inline constexpr uint64_t kCurrentBatch = ~uint64_t{0};
// For a CommunicationScope whose work reads nothing this worker's compute made (or waits for
// markers of its own): wait for no compute work.
inline constexpr uint64_t kNoComputeWork = kCurrentBatch - 1;

// Marks the end of what this worker has queued so far (one batch), then waits until at most
// `inFlight` marked batches are unfinished on the GPU (bounded by `timeout`; false if it ran
// out). This bounds how far the host runs ahead of the GPU, and with it the memory whose reuse
// waits on GPU events (buffers held for copies, blocks recorded on other streams).
bool endBatch(int inFlight, std::chrono::milliseconds timeout);

// Waits until the streams of this worker thread have finished their work (a worker's sync
// point). Returns false if that took longer than `timeout` (the GPU work is still queued).
bool synchronizeThisThread(std::chrono::milliseconds timeout);

// Runs the enclosing kernel's work on this worker's communication stream, after the work that
// produced `inputs`: their `made` markers when every input has one; else everything the compute
// stream has queued so far when they come from the batch running now (`producedInBatch` =
// kCurrentBatch, the default), or only that earlier batch's end (nothing, once it has finished).
// So a collective starts as soon as its input exists, not behind compute queued after it (a
// prefetch of a weight shard made long ago starts at once). `finish()` returns the marker
// consumers wait for. Inactive (a no-op) unless `inputs` are CUDA tensors on a bound worker
// thread.
class CommunicationScope {
 public:
  explicit CommunicationScope(c10::ArrayRef<at::Tensor> inputs, uint64_t producedInBatch = kCurrentBatch,
                              c10::ArrayRef<std::shared_ptr<void>> made = {});
  ~CommunicationScope();
  CommunicationScope(const CommunicationScope&) = delete;
  CommunicationScope& operator=(const CommunicationScope&) = delete;
  bool active() const { return active_; }
  // The end of the work queued in this scope (nullptr when inactive).
  std::shared_ptr<void> finish();

 private:
  bool active_ = false;
};

// Runs the enclosing kernel's copies from host memory onto this worker's GPU on a stream of their
// own (the upload stream) when `when` holds on a CUDA worker thread: they overlap the compute
// queued before them (an offloaded group's weights come on while the blocks before it run, as
// diffusers' group offloading with use_stream), and only their consumers wait, for finish()'s
// marker. The pinned host memory they read is held until they are done (keepUntilDone, on the
// stream current in the scope). Otherwise (CPU workers, a build without CUDA) a no-op.
class UploadScope {
 public:
  explicit UploadScope(bool when);
  ~UploadScope();
  UploadScope(const UploadScope&) = delete;
  UploadScope& operator=(const UploadScope&) = delete;
  // The end of the copies queued in this scope (nullptr when inactive).
  std::shared_ptr<void> finish();

 private:
  bool active_ = false;
};

// Copies `src` (on any GPU of this process) into `dst` (same shape, on this thread's GPU) on the
// current stream with the copy engines: one cudaMemcpy2DAsync per plane of rows (row_copies.h),
// no SMs taken from compute kernels. Both may be any strided views without overlapping elements
// (a region of a larger output included); returns false (nothing queued) for broadcast views.
// Between CPU tensors: a plain copy.
bool copyBetweenDevices(at::Tensor& dst, const at::Tensor& src);
// Lets this GPU's copy engines read `peer`'s memory directly (idempotent).
void enablePeerAccess(int peer);
// Holds `tensors` (read by work queued on the current stream, e.g. another GPU's buffers) until
// that work is done, so their owners can neither free nor overwrite them in place meanwhile.
void keepUntilDone(std::vector<at::Tensor> tensors);
// Drops what keepUntilDone held whose work has finished (cheap; workers call it per batch).
void releaseFinished();

// A copy of `t` in pinned host memory, queued after the work on this thread's current stream (on
// a CUDA worker, on its read stream, which no CUDA graph ever captures); `then` is called
// (on a CUDA driver thread, so it must not call CUDA) once the copy has landed. A CPU tensor
// is copied now and `then` called at once.
void copyToHost(const at::Tensor& t, std::function<void(at::Tensor host)> then);

}  // namespace dtorch::external::cuda
