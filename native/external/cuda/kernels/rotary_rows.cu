#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/rotary_math.cuh"
#include "external/cuda/kernels/rotary_rows.h"
#include "external/cuda/kernels/row_offset.cuh"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;  // per block

template <typename T>
union Pack {
  static constexpr int kVec = 16 / sizeof(T);
  uint4 raw;
  T v[kVec];
};

// One thread per 16 bytes of a row's output (neighbours) or per 16 bytes of each half (halves).
template <typename T, bool HALVES, typename Index>
__global__ void __launch_bounds__(kThreads) rotaryRowsKernel(const T* __restrict__ x, const float* __restrict__ cos, const float* __restrict__ sin,
                                                             T* __restrict__ y, int64_t rows, int d, TokenRows tokens, RowLayout lead, bool sameLayout) {
  constexpr int VEC = Pack<T>::kVec;
  const int perRow = HALVES ? d / 2 / VEC : d / VEC;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t row = thread / perRow;
  if (row >= rows) return;
  const int col = static_cast<int>(thread % perRow) * VEC;
  const int64_t offset = rowOffset<Index>(row, lead);
  const T* in = x + offset;
  const int64_t table = tableRow<Index>(row, tokens, d);  // the token's row of cos and sin
  T* out = y + (sameLayout ? offset : row * d);
  float c[VEC], s[VEC];
  if constexpr (HALVES) {
    const int half = d / 2;
    Pack<T> lo, hi, yLo, yHi;
    lo.raw = *reinterpret_cast<const uint4*>(in + col);
    hi.raw = *reinterpret_cast<const uint4*>(in + col + half);
    float c2[VEC], s2[VEC];
    loadFloats(cos + table + col, c), loadFloats(sin + table + col, s);
    loadFloats(cos + table + col + half, c2), loadFloats(sin + table + col + half, s2);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      const float a = toFloat(lo.v[i]), b = toFloat(hi.v[i]);
      yLo.v[i] = fromFloat<T>(rotate(a, c[i], -b, s[i]));  // rotated = cat(-im, re)
      yHi.v[i] = fromFloat<T>(rotate(b, c2[i], a, s2[i]));
    }
    *reinterpret_cast<uint4*>(out + col) = yLo.raw;
    *reinterpret_cast<uint4*>(out + col + half) = yHi.raw;
  } else {
    Pack<T> p, q;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
    loadFloats(cos + table + col, c), loadFloats(sin + table + col, s);
#pragma unroll
    for (int i = 0; i < VEC; i += 2) {  // rotated = stack(-im, re) over each neighbouring pair
      const float re = toFloat(p.v[i]), im = toFloat(p.v[i + 1]);
      q.v[i] = fromFloat<T>(rotate(re, c[i], -im, s[i]));
      q.v[i + 1] = fromFloat<T>(rotate(im, c[i + 1], re, s[i + 1]));
    }
    *reinterpret_cast<uint4*>(out + col) = q.raw;
  }
}

template <typename T>
int launch(const void* x, const float* cos, const float* sin, void* y, int64_t rows, int d, const TokenRows& tokens, bool halves, const RowLayout& lead,
           bool sameLayout, cudaStream_t stream) {
  constexpr int VEC = Pack<T>::kVec;
  const int64_t threads = rows * (halves ? d / 2 / VEC : d / VEC);
  const auto blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  const auto* xs = static_cast<const T*>(x);
  T* ys = static_cast<T*>(y);
  const bool narrow = rows <= UINT32_MAX;  // every lead size is at most the row count
#define DTORCH_ROTARY_LAUNCH(H)                                                                                                    \
  if (narrow) rotaryRowsKernel<T, H, uint32_t><<<blocks, kThreads, 0, stream>>>(xs, cos, sin, ys, rows, d, tokens, lead, sameLayout); \
  else rotaryRowsKernel<T, H, uint64_t><<<blocks, kThreads, 0, stream>>>(xs, cos, sin, ys, rows, d, tokens, lead, sameLayout);
  if (halves) {
    DTORCH_ROTARY_LAUNCH(true)
  } else {
    DTORCH_ROTARY_LAUNCH(false)
  }
#undef DTORCH_ROTARY_LAUNCH
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int rotaryRows(FloatType type, const void* x, const float* cos, const float* sin, void* y, int64_t rows, int d, const TokenRows& tokens, bool halves,
               const RowLayout& lead, bool sameLayout, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case FloatType::kFloat32:
      return launch<float>(x, cos, sin, y, rows, d, tokens, halves, lead, sameLayout, s);
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16>(x, cos, sin, y, rows, d, tokens, halves, lead, sameLayout, s);
    case FloatType::kFloat16:
      return launch<__half>(x, cos, sin, y, rows, d, tokens, halves, lead, sameLayout, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dtorch::external::cuda::kernels
