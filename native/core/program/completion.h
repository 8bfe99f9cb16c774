// Completion: how a worker hands a read (fetch) or a barrier (sync) back to whoever waits:
// the binding resolves a JS promise through a thread-safe function, or wakes a blocked
// dataSync(). `deliver` is called exactly once, from a worker thread (or, for a read from a GPU,
// from the CUDA driver thread that sees its copy land).
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <functional>
#include <string>

#include "core/operand/dtype.h"

namespace dtorch::core {

struct FetchResult {
  bool ok = true;
  std::string code;     // on failure
  std::string message;  // on failure
  std::string op;       // op whose kernel failed
  uint64_t seq = 0;     // record sequence of the failed node
  at::Tensor host;      // contiguous CPU tensor; float16/bfloat16 arrive as float32
  DType dtype = DType::Float;  // dtype of the tensor that was read
};

struct Completion {
  std::function<void(FetchResult&&)> deliver;
  std::atomic<int> remaining{1};  // parts still to arrive (one per worker for a sync)
  std::atomic<bool> failed{false};  // a part failed and was delivered already

  // One part arrived: the first failure is delivered at once; else the last part delivers (a
  // read has one part, whose value it carries).
  void finishPart(FetchResult&& result) {
    if (!result.ok) {
      if (!failed.exchange(true)) deliver(std::move(result));
      return;
    }
    if (remaining.fetch_sub(1) == 1 && !failed.load()) deliver(std::move(result));
  }
};

}  // namespace dtorch::core
