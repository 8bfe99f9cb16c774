// Where row r of a RowLayout input starts (device code; included by the row kernels' .cu files).
#pragma once
#include <cstdint>

#include "external/cuda/kernels/row_layout.h"

namespace dtorch::external::cuda::kernels {

// Index is uint32_t where every size fits (the launchers check): a 64-bit division costs several
// times more. The loop has constant bounds, so the layout stays in registers.
template <typename Index>
__device__ inline int64_t rowOffset(int64_t row, const RowLayout& lead) {
  Index rest = static_cast<Index>(row);
  int64_t offset = 0;
#pragma unroll
  for (int i = kMaxLeadDims - 1; i >= 0; --i) {
    if (i < lead.dims) {
      const Index size = static_cast<Index>(lead.size[i]);
      offset += static_cast<int64_t>(rest % size) * lead.stride[i];
      rest /= size;
    }
  }
  return offset;
}

}  // namespace dtorch::external::cuda::kernels
