// How DTorch's row kernels read an input whose last dim is contiguous but whose leading dims have
// any strides (a transposed [B, heads, tokens, D] view of a projection's output, for one): row r
// of the output, row-major over the leading sizes, is read at sum(index_i * stride_i) elements
// from the input's start. Plain types only: nvcc compiles the kernels without LibTorch's headers.
#pragma once
#include <cstdint>

namespace dtorch::external::cuda::kernels {

constexpr int kMaxLeadDims = 6;

// The leading (row-indexing) dims of the input, outermost first.
struct RowLayout {
  int dims = 0;
  int64_t size[kMaxLeadDims] = {};
  int64_t stride[kMaxLeadDims] = {};
};

}  // namespace dtorch::external::cuda::kernels
