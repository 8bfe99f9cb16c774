#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/scalar_elementwise.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T, ScalarOp OP>
__global__ void __launch_bounds__(kThreads) scalarOpKernel(const T* x, T* y, int n, float value) {
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const float v = toFloat(x[i]);
    // __fadd_rn/__fmul_rn: one rounded operation each, never contracted with a neighbour
    y[i] = fromFloat<T>(OP == ScalarOp::kAdd ? __fadd_rn(v, value) : __fmul_rn(v, value));
  }
}

template <typename T>
int launch(ScalarOp op, const void* x, void* y, int n, float value, cudaStream_t stream) {
  const int blocks = static_cast<int>((static_cast<int64_t>(n) + kThreads - 1) / kThreads);
  const int grid = blocks < 1024 ? blocks : 1024;
  const T* in = static_cast<const T*>(x);
  T* out = static_cast<T*>(y);
  if (op == ScalarOp::kAdd) scalarOpKernel<T, ScalarOp::kAdd><<<grid, kThreads, 0, stream>>>(in, out, n, value);
  else scalarOpKernel<T, ScalarOp::kMul><<<grid, kThreads, 0, stream>>>(in, out, n, value);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int scalarOp(ScalarOp op, FloatType type, const void* x, void* y, int64_t n, float value, void* stream) {
  if (n <= 0) return 0;
  const auto s = static_cast<cudaStream_t>(stream);
  const int count = static_cast<int>(n);
  switch (type) {
    case FloatType::kFloat32: return launch<float>(op, x, y, count, value, s);
    case FloatType::kBFloat16: return launch<__nv_bfloat16>(op, x, y, count, value, s);
    case FloatType::kFloat16: return launch<__half>(op, x, y, count, value, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dtorch::external::cuda::kernels
