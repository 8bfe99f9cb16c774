// A LibTorch tensor's leading dims as a row kernel reads them (kernels/row_layout.h RowLayout):
// rows of its last dim, reached through any leading strides. For the launchers of
// rms_norm_rows.cu and rotary_rows.cu. CUDA builds only.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "external/cuda/kernels/row_layout.h"

namespace dtorch::external::cuda {

// x's leading sizes and strides; nullopt when it has more leading dims than the kernels take, or
// its start or a row does not begin 16-byte aligned (the kernels load 16 bytes at a time).
inline std::optional<kernels::RowLayout> leadLayoutOf(const at::Tensor& x) {
  if (x.dim() < 1 || x.dim() - 1 > kernels::kMaxLeadDims || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) return std::nullopt;
  kernels::RowLayout lead;
  lead.dims = static_cast<int>(x.dim() - 1);
  for (int i = 0; i < lead.dims; ++i) {
    lead.size[i] = x.size(i);
    lead.stride[i] = x.stride(i);
    if ((x.stride(i) * x.element_size()) % 16 != 0 && x.size(i) > 1) return std::nullopt;
  }
  return lead;
}

}  // namespace dtorch::external::cuda
