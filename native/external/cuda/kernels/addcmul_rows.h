// c + a · b over [batch, rows, d] in one pass, where each operand is either whole or one row per
// batch broadcast over the rows ([batch, 1, d]: adaLN's shift, scale and gate against the
// tokens): the elementwise tail of every modulation and gated residual of SD3's and Flux's
// blocks. LibTorch's broadcasting path reads such operands element by element; here every
// operand is read 16 bytes at a time. Computed in float32 as at::addcmul computes it (one fused
// multiply-add) and rounded once to the type. Plain types only.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

// One operand: element (b, r, j) is at p[b * batchStride + r * rowStride + j] (rowStride 0: one
// row per batch).
struct RowOperand {
  const void* p = nullptr;
  int64_t batchStride = 0;
  int64_t rowStride = 0;
};

// y contiguous [batch, rows, d]. d a multiple of 16 bytes' worth of elements; every pointer and
// stride 16-byte aligned (the caller checks). Returns the CUDA error of the launch (0: none).
int addcmulRows(FloatType type, RowOperand c, RowOperand a, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, void* stream);

}  // namespace dtorch::external::cuda::kernels
