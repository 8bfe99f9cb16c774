#include "external/cuda/scalar_op.h"

#include <ATen/ATen.h>

#include <cfloat>
#include <cmath>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "common/env.h"
#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/scalar_elementwise.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

namespace {
// Up to here the op is launch-bound (a few µs of host time, under a µs on the GPU); past it
// LibTorch's vectorised kernel, nearer the memory bandwidth, is the better one.
constexpr int64_t kMaxElements = 1 << 16;
}  // namespace

bool scalarOpInto(at::Tensor& out, const at::Tensor& x, ScalarOpKind op, double value) {
  static const bool enabled = common::settings().scalarOpKernel;  // 0: always LibTorch's
  if (!enabled || !x.is_cuda() || x.numel() > kMaxElements || !x.is_contiguous() || !out.is_contiguous()) return false;
  if (out.scalar_type() != x.scalar_type() || out.device() != x.device() || out.sizes() != x.sizes()) return false;
  if (!std::isfinite(value) || std::fabs(value) > FLT_MAX) return false;  // LibTorch's own conversion decides those
  const std::optional<k::FloatType> kernelType = kernelFloatType(x.scalar_type());
  if (!kernelType) return false;
  const k::FloatType type = *kernelType;
  const int error = k::scalarOp(op == ScalarOpKind::kAdd ? k::ScalarOp::kAdd : k::ScalarOp::kMul, type, x.data_ptr(), out.data_ptr(), x.numel(),
                                static_cast<float>(value), c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "DTorch's scalar elementwise kernel failed to launch (CUDA error ", error, ")");
  return true;
}

#else

bool scalarOpInto(at::Tensor&, const at::Tensor&, ScalarOpKind, double) { return false; }

#endif

}  // namespace dtorch::external::cuda
