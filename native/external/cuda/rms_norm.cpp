#include "external/cuda/rms_norm.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "common/env.h"
#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/rms_norm_rows.h"
#include "external/cuda/rotary_emb.h"
#include "external/cuda/row_layout_of.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

namespace {

// What the row kernel needs of x, where it serves x and the weight (see the header).
struct NormRows {
  k::FloatType type;
  int64_t d;
  k::RowLayout lead;
};

std::optional<NormRows> normRowsOf(const at::Tensor& x, const std::optional<at::Tensor>& weight) {
  static const bool enabled = common::settings().rmsNormKernel;  // 0: always LibTorch's
  if (!enabled || !x.is_cuda() || x.dim() < 1 || x.numel() == 0 || x.stride(-1) != 1) return std::nullopt;
  const std::optional<k::FloatType> kernelType = kernelFloatType(x.scalar_type());
  if (!kernelType) return std::nullopt;
  const int64_t d = x.size(-1), vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % vec != 0 || d > k::maxRowLength(*kernelType)) return std::nullopt;
  if (weight && (weight->scalar_type() != x.scalar_type() || !weight->is_contiguous() || weight->device() != x.device() ||
                 reinterpret_cast<uintptr_t>(weight->data_ptr()) % 16 != 0)) {
    return std::nullopt;
  }
  const std::optional<k::RowLayout> lead = leadLayoutOf(x);
  if (!lead) return std::nullopt;
  return NormRows{*kernelType, d, *lead};
}

cudaStream_t streamOf(const at::Tensor& x) { return c10::cuda::getCurrentCUDAStream(x.device().index()).stream(); }

}  // namespace

std::optional<at::Tensor> rmsNormLastDim(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const std::optional<NormRows> rows = normRowsOf(x, weight);
  if (!rows) return std::nullopt;
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::rmsNormRows(rows->type, x.data_ptr(), weight ? weight->data_ptr() : nullptr, y.data_ptr(), x.numel() / rows->d,
                                   static_cast<int>(rows->d), rows->lead, static_cast<float>(eps), streamOf(x));
  TORCH_CHECK(error == 0, "rms_norm: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

std::optional<at::Tensor> rmsNormRotaryLastDim(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps, const at::Tensor& cos,
                                               const at::Tensor& sin, int64_t tokensFromEnd) {
  // rotaryEmb's own conditions on what the norm writes (contiguous rows of x's shape)
  if (!common::settings().rotaryKernel) return std::nullopt;
  const std::optional<NormRows> rows = normRowsOf(x, weight);
  if (!rows) return std::nullopt;
  const std::optional<k::TokenRows> tokens = tokenRowsOf(x, cos, sin, tokensFromEnd);
  if (!tokens) return std::nullopt;
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::rmsNormRotaryRows(rows->type, x.data_ptr(), weight ? weight->data_ptr() : nullptr, cos.data_ptr<float>(), sin.data_ptr<float>(),
                                         y.data_ptr(), x.numel() / rows->d, static_cast<int>(rows->d), *tokens, rows->lead, static_cast<float>(eps),
                                         streamOf(x));
  TORCH_CHECK(error == 0, "rms_norm_rotary_emb: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

#else

std::optional<at::Tensor> rmsNormLastDim(const at::Tensor&, const std::optional<at::Tensor>&, double) { return std::nullopt; }
std::optional<at::Tensor> rmsNormRotaryLastDim(const at::Tensor&, const std::optional<at::Tensor>&, double, const at::Tensor&, const at::Tensor&, int64_t) {
  return std::nullopt;
}

#endif

}  // namespace dtorch::external::cuda
