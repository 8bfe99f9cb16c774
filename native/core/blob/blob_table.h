// BlobTable: the local tensors one worker holds, by tensor id. A blob is created when its
// producing kernel runs and erased by a free kernel after the tensor's last use.
// A failed kernel leaves a poisoned blob that carries the error to everything downstream.
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>

namespace dtorch::core {

struct KernelError {
  std::string op;
  std::string message;
  uint64_t seq = 0;
};

struct Blob {
  at::Tensor tensor;
  std::shared_ptr<const KernelError> error;
};

class BlobTable {
 public:
  explicit BlobTable(std::atomic<int64_t>& allocatedBytes) : allocatedBytes_(allocatedBytes) { blobs_.reserve(1024); }
  ~BlobTable() { clear(); }

  const Blob* find(int64_t id) const {
    auto it = blobs_.find(id);
    return it == blobs_.end() ? nullptr : &it->second;
  }
  void put(int64_t id, Blob blob) {
    allocatedBytes_.fetch_add(bytesOf(blob), std::memory_order_relaxed);
    auto [it, inserted] = blobs_.insert_or_assign(id, std::move(blob));
    (void)it;
    (void)inserted;
  }
  void erase(int64_t id) {
    auto it = blobs_.find(id);
    if (it == blobs_.end()) return;
    allocatedBytes_.fetch_sub(bytesOf(it->second), std::memory_order_relaxed);
    blobs_.erase(it);
  }
  void clear() {
    for (auto& [id, blob] : blobs_) allocatedBytes_.fetch_sub(bytesOf(blob), std::memory_order_relaxed);
    blobs_.clear();
  }
  size_t size() const { return blobs_.size(); }

 private:
  static int64_t bytesOf(const Blob& blob) {
    return blob.tensor.defined() ? static_cast<int64_t>(blob.tensor.nbytes()) : 0;
  }
  std::unordered_map<int64_t, Blob> blobs_;
  std::atomic<int64_t>& allocatedBytes_;
};

}  // namespace dtorch::core
