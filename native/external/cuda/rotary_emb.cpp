#include "external/cuda/rotary_emb.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "common/env.h"
#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/rotary_rows.h"
#include "external/cuda/row_layout_of.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

std::optional<k::TokenRows> tokenRowsOf(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t tokensFromEnd) {
  if (tokensFromEnd < 2 || tokensFromEnd > x.dim()) return std::nullopt;
  const int64_t d = x.size(-1), tokens = x.size(-tokensFromEnd);
  int64_t inner = 1;  // rows per token: the dims between the tokens and the last
  for (int64_t i = x.dim() - tokensFromEnd + 1; i < x.dim() - 1; ++i) inner *= x.size(i);
  for (const at::Tensor* t : {&cos, &sin}) {
    if (t->scalar_type() != at::kFloat || t->dim() != 2 || t->size(0) != tokens || t->size(1) != d || !t->is_contiguous() ||
        t->device() != x.device() || reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) {
      return std::nullopt;
    }
  }
  return k::TokenRows{tokens, inner};
}

std::optional<at::Tensor> rotaryEmb(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool halves, int64_t tokensFromEnd) {
  static const bool enabled = common::settings().rotaryKernel;  // 0: always the unfused ops
  if (!enabled || !x.is_cuda() || x.dim() < 2 || x.numel() == 0 || x.stride(-1) != 1) return std::nullopt;
  const std::optional<k::FloatType> kernelType = kernelFloatType(x.scalar_type());
  if (!kernelType) return std::nullopt;
  const k::FloatType type = *kernelType;
  const int64_t d = x.size(-1), vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % (halves ? 2 * vec : vec) != 0 || d > INT32_MAX) return std::nullopt;
  const std::optional<k::TokenRows> tokens = tokenRowsOf(x, cos, sin, tokensFromEnd);
  if (!tokens) return std::nullopt;
  const std::optional<k::RowLayout> lead = leadLayoutOf(x);
  if (!lead) return std::nullopt;
  // a dense x (a transposed view of a projection) gives its layout to y, as the unfused ops'
  // TensorIterator does: attention then takes q and k in the layout of v, and its output
  // flattens back to tokens without a copy
  const bool sameLayout = x.is_non_overlapping_and_dense();
  at::Tensor y = sameLayout ? at::empty_strided(x.sizes(), x.strides(), x.options()) : at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::rotaryRows(type, x.data_ptr(), cos.data_ptr<float>(), sin.data_ptr<float>(), y.data_ptr(), x.numel() / d, static_cast<int>(d),
                                  *tokens, halves, *lead, sameLayout, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "rotary_emb: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

#else

std::optional<kernels::TokenRows> tokenRowsOf(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t) { return std::nullopt; }
std::optional<at::Tensor> rotaryEmb(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, int64_t) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
