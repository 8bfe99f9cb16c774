// RepeatedSegments: the controller's memory of the segments it lowered, by signature
// (segment_signature.h), so that it recognises one it has seen before: a diffusion step or an
// encoder forward recorded again on the same shapes. It counts what it recognised (dt.graph.stats);
// replaying a recognised segment's lowering, and capturing it as a CUDA graph on GPUs, builds on
// it. The most recent kCapacity distinct segments are kept. DTORCH_GRAPHS=0 turns it off.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <unordered_map>

#include "core/graph/segment_signature.h"

namespace dtorch::core {

struct RepeatStats {
  int64_t segments = 0;       // segments lowered
  int64_t nodes = 0;          // their nodes
  int64_t repeats = 0;        // segments recognised as one seen before
  int64_t repeatedNodes = 0;  // their nodes
  int64_t distinct = 0;       // distinct segments remembered now
  int64_t reusedLowerings = 0;  // segments lowered by reusing a repeat's kernels (lowering_cache.h)
};

class RepeatedSegments {
 public:
  static constexpr size_t kCapacity = 512;
  struct Noted {
    SegmentSignature signature;
    bool repeat = false;  // seen before
  };
  // Notes a segment about to be lowered: its signature, and whether it was seen before (counted
  // as a repeat). Controller thread only.
  Noted note(const Segment& segment);
  // Any thread.
  RepeatStats stats() const;

 private:
  SignatureScratch scratch_;
  std::list<SegmentSignature> recent_;  // most recent first
  std::unordered_multimap<uint64_t, std::list<SegmentSignature>::iterator> byHash_;
  std::atomic<int64_t> segments_{0}, nodes_{0}, repeats_{0}, repeatedNodes_{0}, distinct_{0};
};

}  // namespace dtorch::core
