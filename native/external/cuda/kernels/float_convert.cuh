// float32 to and from the types the kernels store (device code; included by the .cu files):
// the kernels compute in float and round once, as LibTorch does for bfloat16 and float16.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dtorch::external::cuda::kernels {

__device__ inline float toFloat(float v) { return v; }
__device__ inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float toFloat(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T fromFloat(float v);
template <>
__device__ inline float fromFloat<float>(float v) { return v; }
template <>
__device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half fromFloat<__half>(float v) { return __float2half_rn(v); }

}  // namespace dtorch::external::cuda::kernels
