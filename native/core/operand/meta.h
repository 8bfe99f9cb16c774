// TensorMeta: what the client knows about a tensor without its data (shape, dtype, mesh,
// one placement per mesh dim). Inferred synchronously when an op is recorded.
#pragma once
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>

#include "core/operand/dtype.h"
#include "core/operand/placement.h"

namespace dtorch::core {

using Shape = c10::SmallVector<int64_t, 6>;
using Placements = c10::SmallVector<Placement, 2>;

struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float;
  int meshId = 0;
  Placements placements;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  int64_t nbytes() const { return numel() * dtypeSize(dtype); }
  int ndim() const { return static_cast<int>(shape.size()); }
};

// The same tensor description: what a graph or a traced call needs of an input to take it again.
inline bool sameMeta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.meshId == b.meshId && a.placements == b.placements;
}

inline bool allReplicate(const Placements& placements) {
  for (const Placement& p : placements) {
    if (!p.isReplicate()) return false;
  }
  return true;
}
// Every partial is a sum or an average (reads can then assemble the pieces by adding them).
inline bool partialsAdd(const Placements& placements) {
  for (const Placement& p : placements) {
    if (p.isPartial() && p.reduce != ReduceOp::kSum && p.reduce != ReduceOp::kAvg) return false;
  }
  return true;
}
inline bool anyShard(const Placements& placements) {
  for (const Placement& p : placements) {
    if (p.isShard()) return true;
  }
  return false;
}

std::string formatShape(const Shape& shape);
std::string formatPlacements(const Placements& placements);

}  // namespace dtorch::core
