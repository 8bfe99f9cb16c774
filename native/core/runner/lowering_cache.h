// LoweringCache: the kernels the controller queued for a segment, kept so that a segment lowered
// before (a step of a loop) is lowered again by rebinding them to its nodes instead of planning
// it afresh. What decides a lowering is the segment's signature (segment_signature.h) plus what
// the signature leaves out: the nodes as fusion rewrote them, where each release lands and which
// tensor it frees (its role and last use), and how many workers there are (a sync goes to all of
// them). Two segments with the same key get the same kernels, for every device kind.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kernel/kernel.h"

namespace dtorch::core {

class Worker;

struct CachedKernel {
  static constexpr uint32_t kNone = ~uint32_t{0};
  Kernel kernel;              // node pointer and id rebound per use
  uint32_t node = kNone;      // index of its node in the segment
  uint32_t release = kNone;   // kFree: index of the release node that names the tensor
};

struct CachedLowering {
  std::vector<std::pair<Worker*, std::vector<CachedKernel>>> batches;  // in the order they were queued
  std::vector<uint32_t> syncs;  // sync nodes, whose completions wait for every worker
};

class LoweringCache {
 public:
  static constexpr size_t kCapacity = 64;  // the most recently used lowerings are kept
  // Controller thread only.
  const CachedLowering* find(uint64_t key);
  void put(uint64_t key, CachedLowering lowering);

 private:
  std::list<std::pair<uint64_t, CachedLowering>> recent_;  // most recent first
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, CachedLowering>>::iterator> byKey_;
};

}  // namespace dtorch::core
