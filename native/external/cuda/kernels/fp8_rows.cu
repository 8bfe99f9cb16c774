#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "external/cuda/kernels/by_float_type.cuh"
#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/fp8_rows.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;                 // per block
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row (warpRowsKernel); the warps of a block (blockRowsKernel)

// VEC elements of T: 16 bytes, one load.
template <typename T>
union Pack {
  static constexpr int VEC = 16 / sizeof(T);
  uint4 raw;
  T v[VEC];
};

// The largest magnitude among the 16-byte chunks of a row this thread takes: columns first,
// first + step, ... below d.
template <typename T>
__device__ float chunksAmax(const T* __restrict__ in, int first, int step, int d) {
  float amax = 0.f;
#pragma unroll 4
  for (int col = first; col < d; col += step) {
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
    for (int i = 0; i < Pack<T>::VEC; ++i) amax = fmaxf(amax, fabsf(toFloat(p.v[i])));
  }
  return amax;
}

// The same chunks divided by the row's scale `s`, rounded to float8_e4m3fn with saturation, into `out`.
template <typename T>
__device__ void quantizeChunks(const T* __restrict__ in, uint8_t* __restrict__ out, float s, int first, int step, int d) {
  constexpr int VEC = Pack<T>::VEC;
#pragma unroll 4
  for (int col = first; col < d; col += step) {
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
    union {
      uint8_t b[VEC];
      typename std::conditional<VEC == 8, uint2, uint32_t>::type raw;
    } o;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.b[i] = __nv_cvt_float_to_fp8(toFloat(p.v[i]) / s, __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<decltype(o.raw)*>(out + col) = o.raw;
  }
}

__device__ float warpMax(float v) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// A warp per row, each lane taking 16 bytes at a time along it: the largest magnitude first (a
// warp shuffle, no block barrier), then the quantized bytes (the second read of the row comes
// from L2). Many rows in flight per SM: rows of 3,072 values are 6 KB, too short to keep a whole
// block busy.
template <typename T>
__global__ void __launch_bounds__(kThreads) warpRowsKernel(const T* __restrict__ x, int64_t rowStride, uint8_t* __restrict__ q,
                                                          float* __restrict__ scale, int64_t rows, int d) {
  constexpr int VEC = Pack<T>::VEC;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  const T* in = x + row * rowStride;
  const float s = fmaxf(warpMax(chunksAmax(in, lane * VEC, 32 * VEC, d)), kFp8MinAmax) / kFp8E4m3Max;
  if (lane == 0) scale[row] = s;
  quantizeChunks(in, q + row * d, s, lane * VEC, 32 * VEC, d);
}

// The scale of a row a block takes, from each thread's largest magnitude (reduced over the block:
// every thread gets it); thread 0 stores it at `scale`.
__device__ float blockRowScale(float amax, float* scale) {
  __shared__ float warps[kRowsPerBlock];
  amax = warpMax(amax);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = amax;
  __syncthreads();
  float rowMax = warps[0];
#pragma unroll
  for (int w = 1; w < kRowsPerBlock; ++w) rowMax = fmaxf(rowMax, warps[w]);
  const float s = fmaxf(rowMax, kFp8MinAmax) / kFp8E4m3Max;
  if (threadIdx.x == 0) *scale = s;
  return s;
}

// A block per row, for long rows (an MLP's or a joined input's 12,288 or 15,360 values): its
// threads take 16 bytes at a time, the largest magnitude reduced over the block, then the bytes.
template <typename T>
__global__ void __launch_bounds__(kThreads) blockRowsKernel(const T* __restrict__ x, int64_t rowStride, uint8_t* __restrict__ q,
                                                           float* __restrict__ scale, int d) {
  constexpr int VEC = Pack<T>::VEC;
  const T* in = x + static_cast<int64_t>(blockIdx.x) * rowStride;
  const float s = blockRowScale(chunksAmax(in, threadIdx.x * VEC, kThreads * VEC, d), scale + blockIdx.x);
  quantizeChunks(in, q + static_cast<int64_t>(blockIdx.x) * d, s, threadIdx.x * VEC, kThreads * VEC, d);
}

// tanh-approximated GELU as LibTorch's CUDA kernel computes it (GeluCUDAKernelImpl: float
// arithmetic, tanhf), rounded to T as its output is.
template <typename T>
__device__ T geluTanh(T v) {
  constexpr float kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
  constexpr float kKappa = 0.044715;
  const float x = toFloat(v);
  const float cube = x * x * x;
  const float inner = kBeta * (x + kKappa * cube);
  return fromFloat<T>(0.5f * x * (1.f + tanhf(inner)));
}

// blockRowsKernel of gelu(x): the first pass applies the GELU and stages each thread's values in
// shared memory (a row, d · sizeof(T) bytes) while it takes the amax; the second quantizes them
// from there (each thread reads back its own chunks: no barrier for the data).
template <typename T>
__global__ void __launch_bounds__(kThreads) geluBlockRowsKernel(const T* __restrict__ x, int64_t rowStride, uint8_t* __restrict__ q,
                                                               float* __restrict__ scale, int d) {
  constexpr int VEC = Pack<T>::VEC;
  extern __shared__ uint4 staged[];
  T* row = reinterpret_cast<T*>(staged);
  const T* in = x + static_cast<int64_t>(blockIdx.x) * rowStride;
  float amax = 0.f;
  for (int col = threadIdx.x * VEC; col < d; col += kThreads * VEC) {
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      p.v[i] = geluTanh(p.v[i]);
      amax = fmaxf(amax, fabsf(toFloat(p.v[i])));
    }
    *reinterpret_cast<uint4*>(row + col) = p.raw;
  }
  const float s = blockRowScale(amax, scale + blockIdx.x);
  quantizeChunks(row, q + static_cast<int64_t>(blockIdx.x) * d, s, threadIdx.x * VEC, kThreads * VEC, d);
}

// Rows of at most this many bytes take a warp each, longer ones a block (measured on an H100:
// a warp per row is faster at 3,072 bfloat16 values, a block at 12,288 and 15,360).
constexpr int kWarpRowBytes = 16384;

template <typename T>
int launch(const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, cudaStream_t stream) {
  if (static_cast<int64_t>(d) * static_cast<int64_t>(sizeof(T)) > kWarpRowBytes) {
    blockRowsKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), rowStride, static_cast<uint8_t*>(q), scale, d);
    return static_cast<int>(cudaGetLastError());
  }
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  warpRowsKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<const T*>(x), rowStride, static_cast<uint8_t*>(q), scale, rows, d);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int launchGelu(const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(d) * sizeof(T);
  if (shared > static_cast<size_t>(kFp8GeluMaxRowBytes)) return static_cast<int>(cudaErrorInvalidValue);
  geluBlockRowsKernel<T><<<static_cast<unsigned>(rows), kThreads, shared, stream>>>(static_cast<const T*>(x), rowStride, static_cast<uint8_t*>(q), scale, d);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int quantizeGeluRowsFp8(FloatType type, const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, void* stream) {
  return byFloatType(type, [&](auto t) { return launchGelu<decltype(t)>(x, rowStride, q, scale, rows, d, static_cast<cudaStream_t>(stream)); });
}

int quantizeRowsFp8(FloatType type, const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, void* stream) {
  return byFloatType(type, [&](auto t) { return launch<decltype(t)>(x, rowStride, q, scale, rows, d, static_cast<cudaStream_t>(stream)); });
}

}  // namespace dtorch::external::cuda::kernels
