// The arithmetic of diffusers' apply_rotary_emb as eager PyTorch rounds it (device code; included
// by the .cu files that rotate: rotary_rows.cu, and rms_norm_rows.cu for the fused norm).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/rotary_rows.h"

namespace dtorch::external::cuda::kernels {

// The float32 values at `p` (16-byte aligned), N of them (a multiple of 4).
template <int N>
__device__ inline void loadFloats(const float* p, float (&out)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + i);
    out[i] = f.x, out[i + 1] = f.y, out[i + 2] = f.z, out[i + 3] = f.w;
  }
}

// x·c + r·s with each product and the sum rounded on their own (no fused multiply-add), as
// PyTorch's separate mul, mul and add kernels round them.
__device__ inline float rotate(float x, float c, float r, float s) { return __fadd_rn(__fmul_rn(x, c), __fmul_rn(r, s)); }

// The first element of row `row`'s token in cos and sin ([tokens, d]), dividing in Index (32 bits
// where the rows fit: a 64-bit division is many instructions on a GPU).
template <typename Index>
__device__ inline int64_t tableRow(int64_t row, const TokenRows& tokens, int d) {
  return static_cast<int64_t>(static_cast<Index>(row) / static_cast<Index>(tokens.inner) % static_cast<Index>(tokens.tokens)) * d;
}

}  // namespace dtorch::external::cuda::kernels
