#include "external/cuda/quick_gelu.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/quick_gelu.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace {

// The kernel's type for x, when it serves x.
std::optional<kernels::FloatType> servedType(const at::Tensor& x) {
  if (!x.is_cuda() || !x.is_contiguous()) return std::nullopt;
  return kernelFloatType(x.scalar_type());
}

void run(kernels::FloatType type, const at::Tensor& x, at::Tensor& out) {
  const int error = kernels::quickGelu(type, x.data_ptr(), out.data_ptr(), x.numel(), c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "quick_gelu: DTorch's kernel failed to launch (CUDA error ", error, ")");
}

}  // namespace

std::optional<at::Tensor> quickGelu(const at::Tensor& x) {
  const std::optional<kernels::FloatType> type = servedType(x);
  if (!type) return std::nullopt;
  at::Tensor out = at::empty_like(x);
  run(*type, x, out);
  return out;
}

bool quickGeluInPlace(at::Tensor& x) {
  const std::optional<kernels::FloatType> type = servedType(x);
  if (!type) return false;
  run(*type, x, x);
  return true;
}

#else

std::optional<at::Tensor> quickGelu(const at::Tensor&) { return std::nullopt; }
bool quickGeluInPlace(at::Tensor&) { return false; }

#endif

}  // namespace dtorch::external::cuda
