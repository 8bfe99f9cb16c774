// Copying one part of a cat whose rows are strided (a transposed [B, tokens, heads, D] view, say)
// into its place in the contiguous result, 16 bytes per thread. LibTorch's cat takes such parts
// element by element through their strides, far below the speed of memory (docs/gpu.md); rows of
// 16-byte multiples copy at the speed of memory. Plain types only: nvcc compiles it without
// LibTorch's headers.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/row_layout.h"

namespace dtorch::external::cuda::kernels {

// The leading (row-indexing) dims of a part, outermost first: their sizes and strides in the part
// (in bytes here), and their strides in the result.
struct RowCopyLayout {
  RowLayout from;
  int64_t toStride[kMaxLeadDims] = {};
};

// Copies `rows` rows of `rowBytes` bytes (a multiple of 16) from `src` to `dst`, row r (row-major
// over layout.size) at its offsets by the two strides; every row start 16-byte aligned (the caller
// checks). Returns the CUDA error of the launch (0: none).
int copyRows(const void* src, void* dst, int64_t rows, int64_t rowBytes, const RowCopyLayout& layout, void* stream);

}  // namespace dtorch::external::cuda::kernels
