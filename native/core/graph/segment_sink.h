// SegmentSink: where the recorder hands the segments it closes. The controller implements it
// (runner/controller.h), so the client side names no layer above its own.
#pragma once
#include <memory>

#include "core/program/segment.h"

namespace dtorch::core {

class SegmentSink {
 public:
  // Takes `segment` to run. Throws when it cannot: the recorder then drops the segment and fails
  // its reads (Recorder::dropSegment).
  virtual void submit(std::shared_ptr<Segment> segment) = 0;
  // A finished segment with its nodes cleared and its node storage kept, or null: the recorder
  // fills it again instead of allocating (and another thread freeing) a fresh one per flush.
  virtual std::shared_ptr<Segment> takeSpare() = 0;

 protected:
  ~SegmentSink() = default;
};

}  // namespace dtorch::core
