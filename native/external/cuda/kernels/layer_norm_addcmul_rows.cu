#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/fp8_rows.h"
#include "external/cuda/kernels/row_operand.cuh"
#include "external/cuda/kernels/layer_norm_addcmul_rows.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;  // per block: 8 rows
constexpr int kLanes = 32;     // one warp per row
constexpr int kMaxLoads = 16;  // 16-byte loads per lane at most

__device__ inline float warpSum(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

__device__ inline float warpMax(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Where an FP8 row goes (layerNormModulateFp8Rows): its bytes and its scale; null pointers: none.
struct Fp8Out {
  uint8_t* q;
  float* scale;
};

// LOADS 16-byte loads per lane cover the row; Index narrows the divisions where the sizes fit 32
// bits. ROUND_NORM: the norm is rounded to T before the multiply-add (layer_norm, then addcmul);
// else not (an affine layer_norm, which computes its weight and bias in float). B_OFFSET: b +
// bOffset, rounded to T, multiplies instead of b (its own instances: the others stay as they were).
// FP8_OUT: the rows, rounded to T, are quantized into `fp8` instead of written to y.
template <typename T, int LOADS, typename Index, bool ROUND_NORM, bool B_OFFSET, bool FP8_OUT = false>
__global__ void __launch_bounds__(kThreads) layerNormAddcmulRowsKernel(const T* __restrict__ x, RowOperand c, RowOperand b, T* __restrict__ y,
                                                                       Index rows, int64_t lines, int d, int64_t yRowStride, float eps, float bOffset,
                                                                       Fp8Out fp8 = {nullptr, nullptr}) {
  constexpr int VEC = Pack<T>::kVec;
  const int64_t line = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / kLanes;  // batch * rows + row
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  if (line >= lines) return;  // whole warps leave together
  const int64_t batch = static_cast<Index>(line) / rows, row = static_cast<Index>(line) % rows;
  const T* in = x + line * d;
  float v[LOADS][VEC];
  float sum = 0.f;
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    const int col = (l * kLanes + lane) * VEC;
    if (col < d) {
      Pack<T> p;
      p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        v[l][i] = toFloat(p.v[i]);
        sum += v[l][i];
      }
    }
  }
  const float mean = warpSum(sum) / static_cast<float>(d);
  float squares = 0.f;  // around the mean, as a second pass over registers: no cancellation
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    if ((l * kLanes + lane) * VEC < d) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) squares += (v[l][i] - mean) * (v[l][i] - mean);
    }
  }
  const float rstd = rsqrtf(warpSum(squares) / static_cast<float>(d) + eps);
  float amax = 0.f;  // FP8_OUT: the output row's largest magnitude
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    const int col = (l * kLanes + lane) * VEC;
    if (col < d) {
      const Pack<T> pc = load<T>(c, batch, row, col), pb = load<T>(b, batch, row, col);
      Pack<T> o;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float norm = (v[l][i] - mean) * rstd;
        const float normed = ROUND_NORM ? toFloat(fromFloat<T>(norm)) : norm;  // layer_norm's output, rounded
        // b + bOffset rounded to T first, as the add it replaces rounds it (1 + scale)
        const float scale = B_OFFSET ? toFloat(fromFloat<T>(toFloat(pb.v[i]) + bOffset)) : toFloat(pb.v[i]);
        o.v[i] = fromFloat<T>(__fmaf_rn(normed, scale, toFloat(pc.v[i])));  // at::addcmul's (or the affine norm's) fma
        if constexpr (FP8_OUT) {
          v[l][i] = toFloat(o.v[i]);  // the output as y would hold it, kept for its bytes
          amax = fmaxf(amax, fabsf(v[l][i]));
        }
      }
      if constexpr (!FP8_OUT) *reinterpret_cast<uint4*>(y + line * yRowStride + col) = o.raw;
    }
  }
  if constexpr (FP8_OUT) {
    // quantizeRowsFp8's scale and bytes (fp8_rows.cu), from the registers
    const float s = fmaxf(warpMax(amax), kFp8MinAmax) / kFp8E4m3Max;
    if (lane == 0) fp8.scale[line] = s;
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int col = (l * kLanes + lane) * VEC;
      if (col < d) {
        union {
          uint8_t b[VEC];
          typename std::conditional<VEC == 8, uint2, uint32_t>::type raw;
        } o;
#pragma unroll
        for (int i = 0; i < VEC; ++i) o.b[i] = __nv_cvt_float_to_fp8(v[l][i] / s, __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<decltype(o.raw)*>(fp8.q + line * d + col) = o.raw;
      }
    }
  }
}

template <typename T, int LOADS, bool ROUND_NORM, bool B_OFFSET, bool FP8_OUT>
void launchWith(const T* x, RowOperand c, RowOperand b, T* y, int64_t batch, int64_t rows, int d, int64_t yRowStride, float eps, float bOffset,
                Fp8Out fp8, cudaStream_t stream) {
  const int64_t lines = batch * rows;
  const auto blocks = static_cast<unsigned>((lines * kLanes + kThreads - 1) / kThreads);
  if (lines <= UINT32_MAX) {
    layerNormAddcmulRowsKernel<T, LOADS, uint32_t, ROUND_NORM, B_OFFSET, FP8_OUT>
        <<<blocks, kThreads, 0, stream>>>(x, c, b, y, static_cast<uint32_t>(rows), lines, d, yRowStride, eps, bOffset, fp8);
  } else {
    layerNormAddcmulRowsKernel<T, LOADS, uint64_t, ROUND_NORM, B_OFFSET, FP8_OUT>
        <<<blocks, kThreads, 0, stream>>>(x, c, b, y, static_cast<uint64_t>(rows), lines, d, yRowStride, eps, bOffset, fp8);
  }
}

template <typename T, bool ROUND_NORM, bool B_OFFSET, bool FP8_OUT = false>
int launchRows(const void* x, RowOperand c, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, int64_t yRowStride, float eps, float bOffset,
               cudaStream_t stream, Fp8Out fp8 = {nullptr, nullptr}) {
  constexpr int VEC = Pack<T>::kVec;
  const int64_t loads = (d / VEC + kLanes - 1) / kLanes;  // per lane
  const auto* xs = static_cast<const T*>(x);
  T* ys = static_cast<T*>(y);
  const int n = static_cast<int>(d);
  // the fewest loads that cover the row: a lane's registers hold LOADS x 16 bytes of it
  if (loads <= 1) launchWith<T, 1, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= 2) launchWith<T, 2, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= 4) launchWith<T, 4, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= 6) launchWith<T, 6, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= 8) launchWith<T, 8, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= 12) launchWith<T, 12, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else if (loads <= kMaxLoads) launchWith<T, kMaxLoads, ROUND_NORM, B_OFFSET, FP8_OUT>(xs, c, b, ys, batch, rows, n, yRowStride, eps, bOffset, fp8, stream);
  else return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int launch(const void* x, RowOperand c, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, int64_t yRowStride, float eps, bool roundNorm,
           float bOffset, cudaStream_t stream) {
  // an affine norm has no offset; adaLN's modulation with or without one
  if (!roundNorm) return launchRows<T, false, false>(x, c, b, y, batch, rows, d, yRowStride, eps, 0.f, stream);
  return bOffset != 0.f ? launchRows<T, true, true>(x, c, b, y, batch, rows, d, yRowStride, eps, bOffset, stream)
                        : launchRows<T, true, false>(x, c, b, y, batch, rows, d, yRowStride, eps, 0.f, stream);
}

}  // namespace

int layerNormModulateFp8Rows(FloatType type, const void* x, RowOperand c, RowOperand b, uint8_t* q, float* scale, int64_t batch, int64_t rows, int64_t d,
                             float eps, float bOffset, void* stream) {
  // bfloat16 only: the FP8 matmul takes bfloat16 activations (fewer instances to compile)
  if (type != FloatType::kBFloat16) return static_cast<int>(cudaErrorInvalidValue);
  return launchRows<__nv_bfloat16, true, true, true>(x, c, b, nullptr, batch, rows, d, d, eps, bOffset, static_cast<cudaStream_t>(stream), Fp8Out{q, scale});
}

int maxLayerNormRow(FloatType type) { return (type == FloatType::kFloat32 ? 4 : 8) * kLanes * kMaxLoads; }

int layerNormAddcmulRows(FloatType type, const void* x, RowOperand c, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, float eps,
                         void* stream, bool roundNorm, float bOffset, int64_t yRowStride) {
  if (yRowStride == 0) yRowStride = d;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case FloatType::kFloat32:
      return launch<float>(x, c, b, y, batch, rows, d, yRowStride, eps, roundNorm, bOffset, s);
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16>(x, c, b, y, batch, rows, d, yRowStride, eps, roundNorm, bOffset, s);
    case FloatType::kFloat16:
      return launch<__half>(x, c, b, y, batch, rows, d, yRowStride, eps, roundNorm, bOffset, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dtorch::external::cuda::kernels
