#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/cat_rows.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;  // per block

// One thread per 16 bytes. Index is uint32_t where every size fits (the launcher checks): a
// 64-bit division costs several times more.
template <typename Index>
__global__ void __launch_bounds__(kThreads) copyRowsKernel(const char* __restrict__ src, char* __restrict__ dst, int64_t rows, int perRow,
                                                           RowCopyLayout layout) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t row = thread / perRow;
  if (row >= rows) return;
  const int64_t col = static_cast<int64_t>(thread % perRow) * 16;
  Index rest = static_cast<Index>(row);
  int64_t from = col, to = col;
#pragma unroll
  for (int i = kMaxLeadDims - 1; i >= 0; --i) {
    if (i < layout.from.dims) {
      const Index size = static_cast<Index>(layout.from.size[i]);
      const auto index = static_cast<int64_t>(rest % size);
      from += index * layout.from.stride[i];
      to += index * layout.toStride[i];
      rest /= size;
    }
  }
  *reinterpret_cast<uint4*>(dst + to) = *reinterpret_cast<const uint4*>(src + from);
}

}  // namespace

int copyRows(const void* src, void* dst, int64_t rows, int64_t rowBytes, const RowCopyLayout& layout, void* stream) {
  const int perRow = static_cast<int>(rowBytes / 16);
  const int64_t threads = rows * perRow;
  const auto blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  const auto s = static_cast<cudaStream_t>(stream);
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  if (rows <= UINT32_MAX) copyRowsKernel<uint32_t><<<blocks, kThreads, 0, s>>>(from, to, rows, perRow, layout);
  else copyRowsKernel<uint64_t><<<blocks, kThreads, 0, s>>>(from, to, rows, perRow, layout);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace dtorch::external::cuda::kernels
