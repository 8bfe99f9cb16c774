// Producer-consumer fusion inside one segment, before the controller lowers it. Where an op's
// output dies at its only reader (released in the same segment, read once) and a rule names the
// pair, the reader becomes one fused op that reads the producer's inputs, and the producer
// becomes dead code (the plan never allocates its output). Eager PyTorch runs every op on its
// own; a recorded segment lets DTorch skip the round trip of the intermediate through memory.
// The rules (fusion.cpp) are local per rank, so they hold for any placements. The fused kernels
// compute exactly the unfused sequence wherever they have no faster path (CPU workers: bit-identical).
// DTORCH_FUSION=0 turns it off.
#pragma once
#include <memory>

#include "core/program/segment.h"

namespace dtorch::core {

class SegmentFusion {
 public:
  SegmentFusion();
  ~SegmentFusion();
  // Rewrites `segment`'s nodes in place; returns how many pairs were fused.
  int fuse(Segment& segment);

 private:
  struct Scratch;
  std::unique_ptr<Scratch> scratch_;  // reused from segment to segment
};

}  // namespace dtorch::core
