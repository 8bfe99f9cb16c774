#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/rotary_math.cuh"
#include "external/cuda/kernels/rms_norm_rows.h"
#include "external/cuda/kernels/row_offset.cuh"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kLoads = 4;       // 16-byte loads per thread at most
constexpr int kThreads = 256;  // per block

// The rotary embedding ROTARY rows get after their norm (cos, sin float32 [tokens, d]).
struct RotaryTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
  TokenRows tokens;
};

// LANES threads (a power of two, at most a warp) share a row; each loads VEC elements at a time.
// ROTARY: each normalised row, rounded as the norm writes it, is rotated as rotary_emb rotates
// what it reads (neighbours pair up, within a thread's VEC elements), then written.
template <typename T, int LANES, typename Index, bool ROTARY>
__global__ void __launch_bounds__(kThreads) rmsNormRowsKernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t rows,
                                                              int d, RowLayout lead, float eps, RotaryTables rotary) {
  constexpr int VEC = 16 / sizeof(T);
  union Pack {
    uint4 raw;
    T v[VEC];
  };
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t row = thread / LANES;
  const int lane = static_cast<int>(thread % LANES);
  // the lanes of one row, for the reduction: a row's group never straddles a warp
  const unsigned group = LANES == 32 ? 0xffffffffu : ((1u << LANES) - 1u) << ((threadIdx.x % 32) / LANES * LANES);
  if (row >= rows) return;  // whole groups leave together
  const T* in = x + rowOffset<Index>(row, lead);
  float v[kLoads][VEC];
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kLoads; ++c) {
    const int col = (c * LANES + lane) * VEC;
    if (col < d) {
      Pack p;
      p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        v[c][i] = toFloat(p.v[i]);
        sum += v[c][i] * v[c][i];
      }
    }
  }
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2) sum += __shfl_xor_sync(group, sum, m, LANES);
  const float rstd = rsqrtf(sum / static_cast<float>(d) + eps);
  T* out = y + row * d;
#pragma unroll
  for (int c = 0; c < kLoads; ++c) {
    const int col = (c * LANES + lane) * VEC;
    if (col < d) {
      Pack p, g;
      if (w != nullptr) g.raw = *reinterpret_cast<const uint4*>(w + col);
#pragma unroll
      for (int i = 0; i < VEC; ++i) p.v[i] = fromFloat<T>(w != nullptr ? v[c][i] * rstd * toFloat(g.v[i]) : v[c][i] * rstd);
      if constexpr (ROTARY) {
        const int64_t table = tableRow<Index>(row, rotary.tokens, d) + col;
        float cs[VEC], sn[VEC];
        loadFloats(rotary.cos + table, cs), loadFloats(rotary.sin + table, sn);
#pragma unroll
        for (int i = 0; i < VEC; i += 2) {  // rotated = stack(-im, re) over each neighbouring pair
          const float re = toFloat(p.v[i]), im = toFloat(p.v[i + 1]);
          p.v[i] = fromFloat<T>(rotate(re, cs[i], -im, sn[i]));
          p.v[i + 1] = fromFloat<T>(rotate(im, cs[i + 1], re, sn[i + 1]));
        }
      }
      *reinterpret_cast<uint4*>(out + col) = p.raw;
    }
  }
}

template <typename T, bool ROTARY>
int launch(const void* x, const void* w, void* y, int64_t rows, int d, const RowLayout& lead, float eps, const RotaryTables& rotary, cudaStream_t stream) {
  constexpr int VEC = 16 / sizeof(T);
  const int loads = d / VEC;
  int lanes = 1;  // as many lanes as loads fill, up to a warp
  while (lanes < 32 && lanes * 2 <= loads) lanes *= 2;
  const int64_t blocks = (rows * lanes + kThreads - 1) / kThreads;
  const auto *xs = static_cast<const T*>(x), *ws = static_cast<const T*>(w);
  T* ys = static_cast<T*>(y);
  const bool narrow = rows <= UINT32_MAX;  // every lead size is at most the row count
  switch (lanes) {
#define DTORCH_RMS_LANES(n)                                                                                                     \
  case n:                                                                                                                       \
    if (narrow) rmsNormRowsKernel<T, n, uint32_t, ROTARY><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xs, ws, ys, rows, d, lead, eps, rotary); \
    else rmsNormRowsKernel<T, n, uint64_t, ROTARY><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xs, ws, ys, rows, d, lead, eps, rotary);        \
    break;
    DTORCH_RMS_LANES(1)
    DTORCH_RMS_LANES(2)
    DTORCH_RMS_LANES(4)
    DTORCH_RMS_LANES(8)
    DTORCH_RMS_LANES(16)
    DTORCH_RMS_LANES(32)
#undef DTORCH_RMS_LANES
  }
  return static_cast<int>(cudaGetLastError());
}

template <bool ROTARY>
int dispatch(FloatType type, const void* x, const void* w, void* y, int64_t rows, int d, const RowLayout& lead, float eps, const RotaryTables& rotary,
             void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case FloatType::kFloat32:
      return launch<float, ROTARY>(x, w, y, rows, d, lead, eps, rotary, s);
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16, ROTARY>(x, w, y, rows, d, lead, eps, rotary, s);
    case FloatType::kFloat16:
      return launch<__half, ROTARY>(x, w, y, rows, d, lead, eps, rotary, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace

int maxRowLength(FloatType type) { return (type == FloatType::kFloat32 ? 4 : 8) * 32 * kLoads; }

int rmsNormRows(FloatType type, const void* x, const void* w, void* y, int64_t rows, int d, const RowLayout& lead, float eps, void* stream) {
  return dispatch<false>(type, x, w, y, rows, d, lead, eps, RotaryTables{}, stream);
}

int rmsNormRotaryRows(FloatType type, const void* x, const void* w, const float* cos, const float* sin, void* y, int64_t rows, int d,
                      const TokenRows& tokens, const RowLayout& lead, float eps, void* stream) {
  return dispatch<true>(type, x, w, y, rows, d, lead, eps, RotaryTables{cos, sin, tokens}, stream);
}

}  // namespace dtorch::external::cuda::kernels
