// How worker threads on CUDA devices order their work with each other. Each CUDA worker runs on
// a stream of its own; a tensor handed to another worker (a collective, a transfer) travels with
// a "ready" marker (a CUDA event recorded on the producer's stream), which the consumer's stream
// waits for, and the consumer's stream is recorded on the tensor's memory so that the caching
// allocator does not reuse it before the consumer is done. No device-wide synchronisation.
// In a build without CUDA, and on CPU devices, all of it is a no-op.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

namespace dtorch::external::cuda {

bool builtWithCuda();

// Binds the calling (worker) thread to CUDA device `index` and a stream of its own.
void bindWorkerThread(int index);

// A marker that the work queued so far on this thread's stream (producing `t`) is done;
// nullptr for CPU tensors.
std::shared_ptr<void> markReady(const at::Tensor& t);

// Makes this thread's stream wait for `ready` before it uses `t`, and keeps `t`'s memory alive
// for this stream. No-op for CPU tensors or a null marker.
void waitFor(const std::shared_ptr<void>& ready, const at::Tensor& t);

// Blocks until this thread's stream has finished its work (a worker's sync point).
void synchronizeThisThread();

}  // namespace dtorch::external::cuda
