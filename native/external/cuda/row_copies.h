// Planning a copy of a strided view into a contiguous buffer as 2-D copies of rows (the shape
// cudaMemcpy2DAsync takes): size-1 dims are dropped and dims contiguous with the next merged;
// the innermost dim gives the row width (a column, when it is strided, is rows of one element),
// the next one the rows and their pitch, and every index of the dims outside them one copy.
// Header-only and free of CUDA and LibTorch, so that a C++ test checks it on any machine.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace dtorch::external::cuda {

// One 2-D copy, in elements: `rows` rows of `width` from `srcOffset`, `srcPitch` apart in the
// source; the copies fill the destination one after another, densely.
struct RowCopy {
  int64_t srcOffset = 0;
  int64_t rows = 1;
  int64_t width = 1;
  int64_t srcPitch = 1;
};

// The copies of the view (sizes, strides in elements), in the view's row-major order; nullopt
// when elements overlap (a broadcast: stride 0 on a dim of size > 1). Empty views give none.
inline std::optional<std::vector<RowCopy>> planRowCopies(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride), outermost first
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return std::vector<RowCopy>{};
    if (sizes[d] == 1) continue;
    if (strides[d] <= 0) return std::nullopt;
    if (!dims.empty() && dims.back().second == strides[d] * sizes[d]) {
      dims.back() = {dims.back().first * sizes[d], strides[d]};
    } else {
      dims.emplace_back(sizes[d], strides[d]);
    }
  }
  if (dims.empty() || dims.back().second != 1) dims.emplace_back(1, 1);  // a scalar, or a column
  RowCopy plane{0, 1, dims.back().first, dims.back().first};
  dims.pop_back();
  if (!dims.empty()) {
    plane.rows = dims.back().first;
    plane.srcPitch = dims.back().second;
    dims.pop_back();
  }
  std::vector<RowCopy> copies;
  std::vector<int64_t> index(dims.size(), 0);
  for (;;) {  // every index of the outer dims, the last one fastest
    RowCopy c = plane;
    for (size_t i = 0; i < dims.size(); ++i) c.srcOffset += index[i] * dims[i].second;
    copies.push_back(c);
    size_t i = dims.size();
    while (i > 0 && ++index[i - 1] == dims[i - 1].first) index[--i] = 0;
    if (i == 0) break;
  }
  return copies;
}

}  // namespace dtorch::external::cuda
