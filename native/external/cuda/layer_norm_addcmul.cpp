#include "external/cuda/layer_norm_addcmul.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <ATen/ExpandUtils.h>
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/layer_norm_addcmul_rows.h"
#include "external/cuda/row_operand_of.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

std::optional<at::Tensor> layerNormAddcmul(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps) {
  if (!x.is_cuda() || c.scalar_type() != x.scalar_type() || b.scalar_type() != x.scalar_type() || c.device() != x.device() || b.device() != x.device()) {
    return std::nullopt;
  }
  const std::optional<k::FloatType> kernelType = kernelFloatType(x.scalar_type());
  if (!kernelType) return std::nullopt;
  const k::FloatType type = *kernelType;
  if ((x.dim() != 2 && x.dim() != 3) || !x.is_contiguous() || x.numel() == 0) return std::nullopt;
  const bool batched = x.dim() == 3;
  const int64_t batch = batched ? x.size(0) : 1, rows = x.size(-2), d = x.size(-1);
  const int64_t vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % vec != 0 || d > k::maxLayerNormRow(type) || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) return std::nullopt;
  // c and b broadcast to x (the op checked they broadcast together); one larger than x is not ours
  if (at::infer_size(at::infer_size(c.sizes(), x.sizes()), b.sizes()) != x.sizes().vec()) return std::nullopt;
  const std::optional<k::RowOperand> shift = rowOperandOf(c, x.sizes()), scale = rowOperandOf(b, x.sizes());
  if (!shift || !scale) return std::nullopt;
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::layerNormAddcmulRows(type, x.data_ptr(), *shift, *scale, y.data_ptr(), batch, rows, d, static_cast<float>(eps),
                                            c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "layer_norm_addcmul: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

#else

std::optional<at::Tensor> layerNormAddcmul(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
