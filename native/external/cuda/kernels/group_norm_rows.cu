#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/group_norm_rows.h"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kLoadsPerThread = 4;  // 16-byte loads of each thread: a block takes 16 KiB of a row

// VEC elements of T: 16 bytes, one load.
template <typename T>
union Pack {
  static constexpr int VEC = 16 / sizeof(T);
  uint4 raw;
  T v[VEC];
};

// The values of a row one block takes (its chunk).
template <typename T>
__host__ __device__ constexpr int64_t chunkValues() {
  return int64_t{kThreads} * kLoadsPerThread * Pack<T>::VEC;
}

template <typename T>
int64_t chunksPerRow(int64_t rowLength) {
  return (rowLength + chunkValues<T>() - 1) / chunkValues<T>();
}

// The sum of v over the block; every thread gets it. `shared`: kThreads / 32 values.
template <typename A>
__device__ A blockSum(A v, A* shared) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  A total = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  __syncthreads();  // `shared` may be written again
  return total;
}

// Pass 1: per block, the sums of (x - s) and (x - s)² over its chunk of row blockIdx.y, with s the
// row's first value (a shift against cancellation when the mean is large against the spread).
template <typename T>
__global__ void __launch_bounds__(kThreads) rowPartialsKernel(const T* __restrict__ x, float* __restrict__ partials, int64_t rowLength) {
  constexpr int VEC = Pack<T>::VEC;
  const T* in = x + static_cast<int64_t>(blockIdx.y) * rowLength;
  const float shift = toFloat(in[0]);
  const int64_t start = static_cast<int64_t>(blockIdx.x) * chunkValues<T>();
  float s1 = 0.f, s2 = 0.f;
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int64_t col = start + (static_cast<int64_t>(i) * kThreads + threadIdx.x) * VEC;
    if (col < rowLength) {
      Pack<T> p;
      p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = toFloat(p.v[j]) - shift;
        s1 += d;
        s2 += d * d;
      }
    }
  }
  __shared__ float shared[kThreads / 32];
  s1 = blockSum(s1, shared);
  s2 = blockSum(s2, shared);
  if (threadIdx.x == 0) {
    float* out = partials + (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * 2;
    out[0] = s1;
    out[1] = s2;
  }
}

// Pass 2: each block sums its row's partials (in double), then normalises its chunk: per channel
// a = rstd · weight, b = bias - a · mean (LibTorch's folding), y = x · a + b rounded to T, and with
// Silu silu(y) as LibTorch's kernel computes it (float, expf), rounded again. A 16-byte load never
// straddles two channels (spatial is a multiple of VEC).
template <typename T, bool Silu>
__global__ void __launch_bounds__(kThreads) normalizeKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                                                            T* __restrict__ y, const float* __restrict__ partials, int64_t rowLength,
                                                            int64_t spatial, int64_t channelsPerGroup, int64_t groups, float eps) {
  constexpr int VEC = Pack<T>::VEC;
  const int64_t row = blockIdx.y;
  const float* rowPartials = partials + row * gridDim.x * 2;
  double s1 = 0, s2 = 0;
  for (unsigned c = threadIdx.x; c < gridDim.x; c += kThreads) {
    s1 += rowPartials[2 * c];
    s2 += rowPartials[2 * c + 1];
  }
  __shared__ double shared[kThreads / 32];
  s1 = blockSum(s1, shared);
  s2 = blockSum(s2, shared);
  const T* in = x + row * rowLength;
  T* out = y + row * rowLength;
  const double shiftedMean = s1 / static_cast<double>(rowLength);
  const float mean = static_cast<float>(static_cast<double>(toFloat(in[0])) + shiftedMean);
  const float var = fmaxf(static_cast<float>(s2 / static_cast<double>(rowLength) - shiftedMean * shiftedMean), 0.f);
  const float rstd = rsqrtf(var + eps);
  const int64_t firstChannel = (row % groups) * channelsPerGroup;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * chunkValues<T>();
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int64_t col = start + (static_cast<int64_t>(i) * kThreads + threadIdx.x) * VEC;
    if (col >= rowLength) continue;
    const int64_t channel = firstChannel + col / spatial;
    const float a = weight ? rstd * toFloat(weight[channel]) : rstd;
    const float b = (bias ? toFloat(bias[channel]) : 0.f) - a * mean;
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      T v = fromFloat<T>(fmaf(toFloat(p.v[j]), a, b));
      if constexpr (Silu) {
        const float f = toFloat(v);
        v = fromFloat<T>(f / (1.f + expf(-f)));
      }
      p.v[j] = v;
    }
    *reinterpret_cast<uint4*>(out + col) = p.raw;
  }
}

template <typename T>
int launch(const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels, int64_t groups,
           int64_t spatial, float eps, bool silu, cudaStream_t stream) {
  const int64_t channelsPerGroup = channels / groups, rowLength = channelsPerGroup * spatial;
  const dim3 grid(static_cast<unsigned>(chunksPerRow<T>(rowLength)), static_cast<unsigned>(n * groups));
  const T* in = static_cast<const T*>(x);
  rowPartialsKernel<T><<<grid, kThreads, 0, stream>>>(in, scratch, rowLength);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return static_cast<int>(error);
  const T *w = static_cast<const T*>(weight), *b = static_cast<const T*>(bias);
  T* out = static_cast<T*>(y);
  if (silu) {
    normalizeKernel<T, true><<<grid, kThreads, 0, stream>>>(in, w, b, out, scratch, rowLength, spatial, channelsPerGroup, groups, eps);
  } else {
    normalizeKernel<T, false><<<grid, kThreads, 0, stream>>>(in, w, b, out, scratch, rowLength, spatial, channelsPerGroup, groups, eps);
  }
  return static_cast<int>(cudaGetLastError());
}

// f(T{}) for `type`'s element type T.
template <typename F>
auto byType(FloatType type, F&& f) {
  switch (type) {
    case FloatType::kBFloat16:
      return f(__nv_bfloat16{});
    case FloatType::kFloat16:
      return f(__half{});
    case FloatType::kFloat32:
    default:
      return f(float{});
  }
}

}  // namespace

int64_t groupNormScratchFloats(FloatType type, int64_t n, int64_t channels, int64_t groups, int64_t spatial) {
  const int64_t rowLength = channels / groups * spatial;
  return byType(type, [&](auto t) { return 2 * n * groups * chunksPerRow<decltype(t)>(rowLength); });
}

int groupNormRows(FloatType type, const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels,
                  int64_t groups, int64_t spatial, float eps, bool silu, void* stream) {
  return byType(type, [&](auto t) {
    return launch<decltype(t)>(x, weight, bias, y, scratch, n, channels, groups, spatial, eps, silu, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace dtorch::external::cuda::kernels
