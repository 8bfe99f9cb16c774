// Planning a copy between two strided views of one shape as 2-D copies of rows (the shape
// cudaMemcpy2DAsync takes): size-1 dims are dropped and dims contiguous with the next (in both
// views) merged; the innermost dim gives the row width (a dim that is strided in either view is
// rows of one element), the next one the rows and their pitches, and every index of the dims
// outside them one copy. Header-only and free of CUDA and LibTorch, so that a C++ test checks
// it on any machine.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace dtorch::external::cuda {

// One 2-D copy, in elements: `rows` rows of `width` elements, rows `srcPitch` apart from
// `srcOffset` in the source and `dstPitch` apart from `dstOffset` in the destination.
struct RowCopy {
  int64_t srcOffset = 0, dstOffset = 0;
  int64_t rows = 1, width = 1;
  int64_t srcPitch = 1, dstPitch = 1;
};

// The copies from a view with `srcStrides` to one with `dstStrides` (both of `sizes`, in
// elements); nullopt when either view has elements that overlap (a broadcast: stride 0 on a dim
// of size > 1). Empty views give none.
inline std::optional<std::vector<RowCopy>> planRowCopies(const std::vector<int64_t>& sizes, const std::vector<int64_t>& srcStrides,
                                                         const std::vector<int64_t>& dstStrides) {
  struct Dim {
    int64_t size, src, dst;  // size and the two strides
  };
  std::vector<Dim> dims;  // outermost first
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return std::vector<RowCopy>{};
    if (sizes[d] == 1) continue;
    if (srcStrides[d] <= 0 || dstStrides[d] <= 0) return std::nullopt;
    if (!dims.empty() && dims.back().src == srcStrides[d] * sizes[d] && dims.back().dst == dstStrides[d] * sizes[d]) {
      dims.back() = {dims.back().size * sizes[d], srcStrides[d], dstStrides[d]};
    } else {
      dims.push_back({sizes[d], srcStrides[d], dstStrides[d]});
    }
  }
  if (dims.empty() || dims.back().src != 1 || dims.back().dst != 1) dims.push_back({1, 1, 1});  // rows of one element
  RowCopy plane{0, 0, 1, dims.back().size, dims.back().size, dims.back().size};
  dims.pop_back();
  if (!dims.empty()) {
    plane.rows = dims.back().size;
    plane.srcPitch = dims.back().src;
    plane.dstPitch = dims.back().dst;
    dims.pop_back();
  }
  std::vector<RowCopy> copies;
  std::vector<int64_t> index(dims.size(), 0);
  for (;;) {  // every index of the outer dims, the last one fastest
    RowCopy c = plane;
    for (size_t i = 0; i < dims.size(); ++i) {
      c.srcOffset += index[i] * dims[i].src;
      c.dstOffset += index[i] * dims[i].dst;
    }
    copies.push_back(c);
    size_t i = dims.size();
    while (i > 0 && ++index[i - 1] == dims[i - 1].size) index[--i] = 0;
    if (i == 0) break;
  }
  return copies;
}

}  // namespace dtorch::external::cuda
