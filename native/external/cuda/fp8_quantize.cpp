#include "external/cuda/fp8_quantize.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/fp8_rows.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

namespace {

using RowKernel = int (*)(k::FloatType, const void*, int64_t, void*, float*, int64_t, int, void*);

// x's rows through `kernel` when it serves them (see the header), else nullopt.
std::optional<std::pair<at::Tensor, at::Tensor>> quantizeRows(const at::Tensor& x, RowKernel kernel, int64_t maxRowBytes) {
  if (!x.is_cuda() || x.dim() != 2 || x.size(0) == 0 || x.size(0) > INT32_MAX || x.stride(1) != 1) return std::nullopt;
  const std::optional<k::FloatType> type = kernelFloatType(x.scalar_type());
  if (!type) return std::nullopt;
  const int64_t d = x.size(1), vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % vec != 0 || d > INT32_MAX || d * x.element_size() > maxRowBytes) return std::nullopt;
  if (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0 || (x.stride(0) * x.element_size()) % 16 != 0) return std::nullopt;
  at::Tensor q = at::empty({x.size(0), d}, x.options().dtype(at::kFloat8_e4m3fn));
  at::Tensor scale = at::empty({x.size(0), 1}, x.options().dtype(at::kFloat));
  const int error = kernel(*type, x.data_ptr(), x.stride(0), q.data_ptr(), scale.data_ptr<float>(), x.size(0), static_cast<int>(d),
                           c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "fp8_linear: DTorch's row quantization kernel failed to launch (CUDA error ", error, ")");
  return std::make_pair(q, scale);
}

}  // namespace

std::optional<std::pair<at::Tensor, at::Tensor>> quantizeRowsFp8(const at::Tensor& x) { return quantizeRows(x, k::quantizeRowsFp8, INT64_MAX); }

std::optional<std::pair<at::Tensor, at::Tensor>> quantizeGeluRowsFp8(const at::Tensor& x) {
  return quantizeRows(x, k::quantizeGeluRowsFp8, k::kFp8GeluMaxRowBytes);
}

#else

std::optional<std::pair<at::Tensor, at::Tensor>> quantizeRowsFp8(const at::Tensor&) { return std::nullopt; }
std::optional<std::pair<at::Tensor, at::Tensor>> quantizeGeluRowsFp8(const at::Tensor&) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
