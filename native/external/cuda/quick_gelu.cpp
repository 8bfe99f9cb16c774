#include "external/cuda/quick_gelu.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/quick_gelu.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

bool quickGeluInto(at::Tensor& out, const at::Tensor& x) {
  if (!x.is_cuda() || !x.is_contiguous() || !out.is_contiguous()) return false;
  if (out.scalar_type() != x.scalar_type() || out.device() != x.device() || out.sizes() != x.sizes()) return false;
  const std::optional<kernels::FloatType> type = kernelFloatType(x.scalar_type());
  if (!type) return false;
  const int error = kernels::quickGelu(*type, x.data_ptr(), out.data_ptr(), x.numel(), c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "quick_gelu: DTorch's kernel failed to launch (CUDA error ", error, ")");
  return true;
}

#else

bool quickGeluInto(at::Tensor&, const at::Tensor&) { return false; }

#endif

}  // namespace dtorch::external::cuda
