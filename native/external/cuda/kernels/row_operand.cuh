// 16-byte loads of a RowOperand (addcmul_rows.h: whole, or one row per batch broadcast over the
// rows), for the row kernels' .cu files (device code).
#pragma once
#include <cstdint>

#include "external/cuda/kernels/addcmul_rows.h"

namespace dtorch::external::cuda::kernels {

// 16 bytes of T, as one vector load or store.
template <typename T>
union Pack {
  static constexpr int kVec = 16 / sizeof(T);
  uint4 raw;
  T v[kVec];
};

// Elements (batch, row, col .. col + kVec) of `o`.
template <typename T>
__device__ inline Pack<T> load(const RowOperand& o, int64_t batch, int64_t row, int64_t col) {
  Pack<T> p;
  p.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(o.p) + batch * o.batchStride + row * o.rowStride + col);
  return p;
}

}  // namespace dtorch::external::cuda::kernels
