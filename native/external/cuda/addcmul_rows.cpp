#include "external/cuda/addcmul_rows.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <ATen/ExpandUtils.h>
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/addcmul_rows.h"
#include "external/cuda/row_operand_of.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

std::optional<at::Tensor> addcmulRows(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  if (!c.is_cuda() || a.scalar_type() != c.scalar_type() || b.scalar_type() != c.scalar_type() || a.device() != c.device() || b.device() != c.device()) {
    return std::nullopt;
  }
  const std::optional<k::FloatType> kernelType = kernelFloatType(c.scalar_type());
  if (!kernelType) return std::nullopt;
  const k::FloatType type = *kernelType;
  const std::vector<int64_t> shape = at::infer_size(at::infer_size(c.sizes(), a.sizes()), b.sizes());
  if (shape.size() < 2 || shape.size() > 3) return std::nullopt;
  const bool batched = shape.size() == 3;
  const int64_t batch = batched ? shape[0] : 1, rows = shape[shape.size() - 2], d = shape.back();
  const int64_t vec = 16 / static_cast<int64_t>(c.element_size());
  if (d % vec != 0 || batch * rows * d == 0) return std::nullopt;
  bool broadcast = false;
  k::RowOperand ops[3];
  const at::Tensor* inputs[3] = {&c, &a, &b};
  for (int i = 0; i < 3; ++i) {
    const std::optional<k::RowOperand> op = rowOperandOf(*inputs[i], shape);
    if (!op) return std::nullopt;
    broadcast = broadcast || (op->rowStride == 0 && rows > 1);
    ops[i] = *op;
  }
  if (!broadcast) return std::nullopt;  // whole operands: LibTorch's kernel is vectorized already
  at::Tensor y = at::empty(shape, c.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::addcmulRows(type, ops[0], ops[1], ops[2], y.data_ptr(), batch, rows, d, c10::cuda::getCurrentCUDAStream(c.device().index()).stream());
  TORCH_CHECK(error == 0, "addcmul: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

#else

std::optional<at::Tensor> addcmulRows(const at::Tensor&, const at::Tensor&, const at::Tensor&) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
