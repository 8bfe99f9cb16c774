// BlobTable: the local tensors one worker holds, by tensor id. A blob is created when its
// producing kernel runs and erased by a free kernel after the tensor's last use.
// A failed kernel leaves a poisoned blob that carries the error to everything downstream.
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/error.h"
#include "common/id_map.h"

namespace dtorch::core {

struct KernelError {
  std::string op;
  std::string message;
  uint64_t seq = 0;
  const char* code = common::code::kKernelFailed;  // TIMEOUT when a wait ran out
};

// The code a failure of `e` keeps downstream: a wait that ran out stays a TIMEOUT, so that every
// read depending on it says so; anything else is KERNEL_FAILED.
inline const char* kernelErrorCode(const std::exception& e) {
  const auto* error = dynamic_cast<const common::DTorchError*>(&e);
  return error && error->code() == common::code::kTimeout ? common::code::kTimeout : common::code::kKernelFailed;
}

struct Blob {
  at::Tensor tensor;
  std::shared_ptr<const KernelError> error;
  // Non-null while the tensor is still being written on another stream of this worker (a
  // collective on the communication stream): its first reader's stream waits for it.
  std::shared_ptr<void> pending;
  // Non-null while another stream of this worker may still read the tensor (it was the input of
  // a collective): an op that would write into its buffer waits for this first.
  std::shared_ptr<void> readBy;
  // The worker's batch that produced the tensor (external::cuda::batchesEnded() then); unknown
  // counts as the batch running now.
  uint64_t batch = ~uint64_t{0};
  // Non-null when a communicating op reads the tensor: the end of the compute work that made it.
  std::shared_ptr<void> made;
};

class BlobTable {
 public:
  BlobTable(std::atomic<int64_t>& allocatedBytes, std::atomic<int64_t>& peakBytes)
      : blobs_(1024), allocatedBytes_(allocatedBytes), peakBytes_(peakBytes) {}
  ~BlobTable() { clear(); }

  // The pointer is valid until the next put().
  const Blob* find(int64_t id) const { return blobs_.find(id); }
  Blob* findMutable(int64_t id) { return blobs_.find(id); }
  void put(int64_t id, Blob blob) {
    int64_t now = allocatedBytes_.fetch_add(bytesOf(blob), std::memory_order_relaxed) + bytesOf(blob);
    if (const Blob* old = blobs_.find(id)) now = allocatedBytes_.fetch_sub(bytesOf(*old), std::memory_order_relaxed) - bytesOf(*old);
    if (now > peakBytes_.load(std::memory_order_relaxed)) peakBytes_.store(now, std::memory_order_relaxed);
    blobs_.put(id, std::move(blob));
  }
  void erase(int64_t id) {
    const Blob* blob = blobs_.find(id);
    if (!blob) return;
    allocatedBytes_.fetch_sub(bytesOf(*blob), std::memory_order_relaxed);
    blobs_.erase(id);
  }
  void clear() {
    blobs_.forEach([&](int64_t, Blob& blob) { allocatedBytes_.fetch_sub(bytesOf(blob), std::memory_order_relaxed); });
    blobs_.clear();
  }
  size_t size() const { return blobs_.size(); }

 private:
  static int64_t bytesOf(const Blob& blob) {
    return blob.tensor.defined() ? static_cast<int64_t>(blob.tensor.nbytes()) : 0;
  }
  common::IdMap<Blob> blobs_;
  std::atomic<int64_t>& allocatedBytes_;
  std::atomic<int64_t>& peakBytes_;  // written by the owning worker only; reset by the client
};

}  // namespace dtorch::core
