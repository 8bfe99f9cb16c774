#include "core/runner/repeated_segments.h"

namespace dtorch::core {

RepeatedSegments::Noted RepeatedSegments::note(const Segment& segment) {
  const int64_t n = static_cast<int64_t>(segment.nodes.size());
  segments_.fetch_add(1, std::memory_order_relaxed);
  nodes_.fetch_add(n, std::memory_order_relaxed);
  const SegmentSignature sig = signatureOf(segment, scratch_);
  auto [first, last] = byHash_.equal_range(sig.hash);
  for (auto it = first; it != last; ++it) {
    if (*it->second == sig) {
      recent_.splice(recent_.begin(), recent_, it->second);  // most recent first
      repeats_.fetch_add(1, std::memory_order_relaxed);
      repeatedNodes_.fetch_add(n, std::memory_order_relaxed);
      return {sig, true};
    }
  }
  recent_.push_front(sig);
  byHash_.emplace(recent_.front().hash, recent_.begin());
  if (recent_.size() > kCapacity) {  // forget the least recent
    auto oldest = std::prev(recent_.end());
    auto [a, b] = byHash_.equal_range(oldest->hash);
    for (auto it = a; it != b; ++it) {
      if (it->second == oldest) {
        byHash_.erase(it);
        break;
      }
    }
    recent_.pop_back();
  }
  distinct_.store(static_cast<int64_t>(recent_.size()), std::memory_order_relaxed);
  return {sig, false};
}

RepeatStats RepeatedSegments::stats() const {
  return {segments_.load(std::memory_order_relaxed), nodes_.load(std::memory_order_relaxed), repeats_.load(std::memory_order_relaxed),
          repeatedNodes_.load(std::memory_order_relaxed), distinct_.load(std::memory_order_relaxed), 0};
}

}  // namespace dtorch::core
