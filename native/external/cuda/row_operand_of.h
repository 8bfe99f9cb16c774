// A LibTorch tensor as a row kernel's operand (kernels/addcmul_rows.h RowOperand): broadcast to
// the kernel's [rows, d] or [batch, rows, d], for the launchers of addcmul_rows.cu and
// layer_norm_addcmul_rows.cu. CUDA builds only.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "external/cuda/kernels/addcmul_rows.h"

namespace dtorch::external::cuda {

// `t` expanded to `shape` (a view: broadcast dims get stride 0); nullopt when its last dim is not
// contiguous, or its start or its row and batch strides are not 16-byte aligned (the kernels
// load 16 bytes at a time).
inline std::optional<kernels::RowOperand> rowOperandOf(const at::Tensor& t, at::IntArrayRef shape) {
  const at::Tensor e = t.expand(shape);
  const auto bytes = static_cast<int64_t>(t.element_size());
  if (e.stride(-1) != 1 || reinterpret_cast<uintptr_t>(e.data_ptr()) % 16 != 0) return std::nullopt;
  const int64_t rowStride = e.stride(-2), batchStride = shape.size() == 3 ? e.stride(0) : 0;
  if ((rowStride * bytes) % 16 != 0 || (batchStride * bytes) % 16 != 0) return std::nullopt;
  return kernels::RowOperand{e.data_ptr(), batchStride, rowStride};
}

}  // namespace dtorch::external::cuda
