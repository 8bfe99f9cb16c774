#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/quick_gelu.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) quickGeluKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const float v = toFloat(x[i]);
    const float scaled = toFloat(fromFloat<T>(__fmul_rn(v, 1.702f)));               // at::mul(x, 1.702)
    const float gate = toFloat(fromFloat<T>(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-scaled)))));  // at::sigmoid: 1 / (1 + exp(-a))
    y[i] = fromFloat<T>(__fmul_rn(v, gate));                                          // mul_
  }
}

template <typename T>
int launch(const void* x, void* y, int64_t n, cudaStream_t stream) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const auto grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  quickGeluKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int quickGelu(FloatType type, const void* x, void* y, int64_t n, void* stream) {
  if (n <= 0) return 0;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case FloatType::kFloat32: return launch<float>(x, y, n, s);
    case FloatType::kBFloat16: return launch<__nv_bfloat16>(x, y, n, s);
    case FloatType::kFloat16: return launch<__half>(x, y, n, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dtorch::external::cuda::kernels
