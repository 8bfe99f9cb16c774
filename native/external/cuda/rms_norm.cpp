#include "external/cuda/rms_norm.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "common/env.h"
#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/rms_norm_rows.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

std::optional<at::Tensor> rmsNormLastDim(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  static const bool enabled = common::settings().rmsNormKernel;  // 0: always LibTorch's
  if (!enabled || !x.is_cuda() || x.dim() < 1 || x.dim() - 1 > k::kMaxLeadDims || x.numel() == 0 || x.stride(-1) != 1) return std::nullopt;
  const std::optional<k::FloatType> kernelType = kernelFloatType(x.scalar_type());
  if (!kernelType) return std::nullopt;
  const k::FloatType type = *kernelType;
  const int64_t d = x.size(-1), vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % vec != 0 || d > k::maxRowLength(type)) return std::nullopt;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (weight && (weight->scalar_type() != x.scalar_type() || !weight->is_contiguous() || weight->device() != x.device() || !aligned(weight->data_ptr()))) {
    return std::nullopt;
  }
  if (!aligned(x.data_ptr())) return std::nullopt;
  k::RowLayout lead;
  lead.dims = static_cast<int>(x.dim() - 1);
  for (int i = 0; i < lead.dims; ++i) {
    lead.size[i] = x.size(i);
    lead.stride[i] = x.stride(i);
    if ((x.stride(i) * x.element_size()) % 16 != 0 && x.size(i) > 1) return std::nullopt;  // every row starts 16-byte aligned
  }
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::rmsNormRows(type, x.data_ptr(), weight ? weight->data_ptr() : nullptr, y.data_ptr(), x.numel() / d, static_cast<int>(d), lead,
                                   static_cast<float>(eps), c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "rms_norm: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

#else

std::optional<at::Tensor> rmsNormLastDim(const at::Tensor&, const std::optional<at::Tensor>&, double) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
