#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/by_float_type.cuh"
#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/group_norm_rows.h"
#include "external/cuda/kernels/row_operand.cuh"  // Pack

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kLoadsPerThread = 4;  // 16-byte loads of each thread: a block takes 16 KiB of a row
constexpr int64_t kMaxLastChannels = 2048;  // channels last: a block folds every channel's scale and shift into shared memory

// The values of a row one block takes (its chunk).
template <typename T>
__host__ __device__ constexpr int64_t chunkValues() {
  return int64_t{kThreads} * kLoadsPerThread * Pack<T>::kVec;
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

// A row's mean and 1/std from the sums of (x - shift) and (x - shift)² over its `count` values
// (the variance biased, as LibTorch's).
struct MeanRstd {
  float mean, rstd;
};
__device__ MeanRstd meanRstd(double s1, double s2, double count, float shift, float eps) {
  const double shiftedMean = s1 / count;
  const float var = fmaxf(static_cast<float>(s2 / count - shiftedMean * shiftedMean), 0.f);
  return {static_cast<float>(static_cast<double>(shift) + shiftedMean), rsqrtf(var + eps)};
}

// x · a + b rounded to T, as LibTorch's group_norm writes it; with Silu, silu of that rounded
// value as LibTorch's kernel computes it (float, expf), rounded again.
template <typename T, bool Silu>
__device__ T normalized(T x, float a, float b) {
  T v = fromFloat<T>(fmaf(toFloat(x), a, b));
  if constexpr (Silu) {
    const float f = toFloat(v);
    v = fromFloat<T>(f / (1.f + expf(-f)));
  }
  return v;
}

// Pass 1: per block, the sums of (x - s) and (x - s)² over its chunk of row blockIdx.y, with s the
// row's first value (a shift against cancellation when the mean is large against the spread).
template <typename T>
__global__ void __launch_bounds__(kThreads) rowPartialsKernel(const T* __restrict__ x, float* __restrict__ partials, int64_t rowLength) {
  constexpr int VEC = Pack<T>::kVec;
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
// a = rstd · weight, b = bias - a · mean (LibTorch's folding), then `normalized`. A 16-byte load
// never straddles two channels (spatial is a multiple of VEC).
template <typename T, bool Silu>
__global__ void __launch_bounds__(kThreads) normalizeKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                                                            T* __restrict__ y, const float* __restrict__ partials, int64_t rowLength,
                                                            int64_t spatial, int64_t channelsPerGroup, int64_t groups, float eps) {
  constexpr int VEC = Pack<T>::kVec;
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
  const MeanRstd stats = meanRstd(s1, s2, static_cast<double>(rowLength), toFloat(in[0]), eps);
  const int64_t firstChannel = (row % groups) * channelsPerGroup;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * chunkValues<T>();
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int64_t col = start + (static_cast<int64_t>(i) * kThreads + threadIdx.x) * VEC;
    if (col >= rowLength) continue;
    const int64_t channel = firstChannel + col / spatial;
    const float a = weight ? stats.rstd * toFloat(weight[channel]) : stats.rstd;
    const float b = (bias ? toFloat(bias[channel]) : 0.f) - a * stats.mean;
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + col);
#pragma unroll
    for (int j = 0; j < VEC; ++j) p.v[j] = normalized<T, Silu>(p.v[j], a, b);
    *reinterpret_cast<uint4*>(out + col) = p.raw;
  }
}

// ---- channels last: x [N, spatial, C] (a [N, C, H, W] tensor in channels-last layout) -----------
// A thread always takes the same 16-byte vector of channels (C / VEC vectors a position divide the
// block's threads), so its sums belong to fixed groups: one group when a group spans whole vectors
// (GroupsPerVec 1), else GroupsPerVec whole groups. Blocks take kLoadsPerThread * kThreads vectors:
// a run of positions over all channels. The sums are reduced in a fixed order (bits repeat).

// Calls f(p, position) with each 16-byte vector of channels [firstChannel, firstChannel + VEC)
// this thread takes among the block's positions [start, start + positionsPerBlock) of x [spatial, channels].
template <typename T, typename F>
__device__ void forEachLastVector(const T* in, int64_t spatial, int channels, int firstChannel, int64_t start, int positionsPerBlock, F&& f) {
  const int vecsPerRow = channels / Pack<T>::kVec;
  for (int r = threadIdx.x / vecsPerRow; r < positionsPerBlock; r += kThreads / vecsPerRow) {
    const int64_t position = start + r;
    if (position >= spatial) break;
    Pack<T> p;
    p.raw = *reinterpret_cast<const uint4*>(in + position * channels + firstChannel);
    f(p, position);
  }
}

// Pass 1: per block and group, the sums of (x - s) and (x - s)² over its positions, s the group's
// first value at position 0; partials[((n * chunks + chunk) * groups + g) * 2 + {0, 1}].
template <typename T, int GroupsPerVec>
__global__ void __launch_bounds__(kThreads) lastPartialsKernel(const T* __restrict__ x, float* __restrict__ partials, int64_t spatial, int channels,
                                                               int channelsPerGroup, int positionsPerBlock) {
  constexpr int VEC = Pack<T>::kVec;
  __shared__ float sums[kThreads][GroupsPerVec][2];
  const int vecsPerRow = channels / VEC, groups = channels / channelsPerGroup;
  const int vec = threadIdx.x % vecsPerRow, firstChannel = vec * VEC;
  const int64_t sample = blockIdx.y, start = static_cast<int64_t>(blockIdx.x) * positionsPerBlock;
  const T* in = x + sample * spatial * channels;
  constexpr int groupSpan = VEC / GroupsPerVec;  // channels of the vector in one group (GroupsPerVec 1: all of them)
  float shift[GroupsPerVec], s1[GroupsPerVec] = {}, s2[GroupsPerVec] = {};
#pragma unroll
  for (int k = 0; k < GroupsPerVec; ++k) shift[k] = toFloat(in[(firstChannel + k * groupSpan) / channelsPerGroup * channelsPerGroup]);
  forEachLastVector(in, spatial, channels, firstChannel, start, positionsPerBlock, [&](const Pack<T>& p, int64_t) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int k = GroupsPerVec == 1 ? 0 : j / groupSpan;
      const float d = toFloat(p.v[j]) - shift[k];
      s1[k] += d;
      s2[k] += d * d;
    }
  });
#pragma unroll
  for (int k = 0; k < GroupsPerVec; ++k) {
    sums[threadIdx.x][k][0] = s1[k];
    sums[threadIdx.x][k][1] = s2[k];
  }
  __syncthreads();
  // the threads of one vector, in order; then (one group over several vectors) the vectors of a group, in order
  if (threadIdx.x < vecsPerRow) {
    for (int k = 0; k < GroupsPerVec; ++k) {
      float a = 0.f, b = 0.f;
      for (int t = threadIdx.x; t < kThreads; t += vecsPerRow) {
        a += sums[t][k][0];
        b += sums[t][k][1];
      }
      s1[k] = a;
      s2[k] = b;
    }
  }
  __syncthreads();
  if (threadIdx.x < vecsPerRow) {
#pragma unroll
    for (int k = 0; k < GroupsPerVec; ++k) {
      sums[threadIdx.x][k][0] = s1[k];
      sums[threadIdx.x][k][1] = s2[k];
    }
  }
  __syncthreads();
  float* out = partials + (sample * gridDim.x + blockIdx.x) * groups * 2;
  if (GroupsPerVec > 1) {
    if (threadIdx.x < vecsPerRow) {
      for (int k = 0; k < GroupsPerVec; ++k) {
        const int g = threadIdx.x * GroupsPerVec + k;
        out[2 * g] = sums[threadIdx.x][k][0];
        out[2 * g + 1] = sums[threadIdx.x][k][1];
      }
    }
  } else if (threadIdx.x < groups) {
    const int vecsPerGroup = channelsPerGroup / VEC;
    float a = 0.f, b = 0.f;
    for (int v = threadIdx.x * vecsPerGroup; v < (threadIdx.x + 1) * vecsPerGroup; ++v) {
      a += sums[v][0][0];
      b += sums[v][0][1];
    }
    out[2 * threadIdx.x] = a;
    out[2 * threadIdx.x + 1] = b;
  }
}

// Pass 2: one block per (sample, group): its mean and 1/std from the chunks' partials (summed in
// double, in order), into stats[(n * groups + g) * 2 + {0, 1}].
template <typename T>
__global__ void __launch_bounds__(kThreads) lastStatsKernel(const T* __restrict__ x, const float* __restrict__ partials, float* __restrict__ stats,
                                                            int64_t spatial, int channels, int channelsPerGroup, int chunks, float eps) {
  const int groups = channels / channelsPerGroup;
  const int64_t sample = blockIdx.x / groups;
  const int g = blockIdx.x % groups;
  double s1 = 0, s2 = 0;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const float* p = partials + ((sample * chunks + c) * groups + g) * 2;
    s1 += p[0];
    s2 += p[1];
  }
  __shared__ double shared[kThreads / 32];
  s1 = blockSum(s1, shared);
  s2 = blockSum(s2, shared);
  if (threadIdx.x == 0) {
    const float shift = toFloat(x[sample * spatial * channels + static_cast<int64_t>(g) * channelsPerGroup]);
    const MeanRstd m = meanRstd(s1, s2, static_cast<double>(spatial) * channelsPerGroup, shift, eps);
    stats[blockIdx.x * 2] = m.mean;
    stats[blockIdx.x * 2 + 1] = m.rstd;
  }
}

// Pass 3: each block folds its sample's statistics into per-channel a and b (shared memory), then
// writes its positions as normalizeKernel does.
template <typename T, bool Silu>
__global__ void __launch_bounds__(kThreads) lastNormalizeKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                                                                T* __restrict__ y, const float* __restrict__ stats, int64_t spatial, int channels,
                                                                int channelsPerGroup, int positionsPerBlock) {
  constexpr int VEC = Pack<T>::kVec;
  extern __shared__ float folded[];  // a[channels], then b[channels]
  const int64_t sample = blockIdx.y;
  const int groups = channels / channelsPerGroup;
  for (int c = threadIdx.x; c < channels; c += kThreads) {
    const float* st = stats + (sample * groups + c / channelsPerGroup) * 2;
    const float a = weight ? st[1] * toFloat(weight[c]) : st[1];
    folded[c] = a;
    folded[channels + c] = (bias ? toFloat(bias[c]) : 0.f) - a * st[0];
  }
  __syncthreads();
  const int vecsPerRow = channels / VEC;
  const int firstChannel = (threadIdx.x % vecsPerRow) * VEC;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * positionsPerBlock;
  const T* in = x + sample * spatial * channels;
  T* out = y + sample * spatial * channels;
  forEachLastVector(in, spatial, channels, firstChannel, start, positionsPerBlock, [&](Pack<T> p, int64_t position) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) p.v[j] = normalized<T, Silu>(p.v[j], folded[firstChannel + j], folded[channels + firstChannel + j]);
    *reinterpret_cast<uint4*>(out + position * channels + firstChannel) = p.raw;
  });
}

// Positions a block takes, chunks a sample splits into, and the groups a vector holds (0: the layout is not served).
template <typename T>
struct LastLayout {
  int positionsPerBlock = 0;
  int64_t chunks = 0;
  int groupsPerVec = 0;
  LastLayout(int64_t spatial, int64_t channels, int64_t groups) {
    constexpr int VEC = Pack<T>::kVec;
    const int64_t cpg = channels / groups;
    if (channels % VEC != 0 || channels > kMaxLastChannels || kThreads % (channels / VEC) != 0) return;
    if (cpg % VEC == 0) groupsPerVec = 1;
    else if (VEC % cpg == 0) groupsPerVec = static_cast<int>(VEC / cpg);
    else return;
    positionsPerBlock = static_cast<int>(int64_t{kThreads} * kLoadsPerThread / (channels / VEC));
    chunks = (spatial + positionsPerBlock - 1) / positionsPerBlock;
  }
};

template <typename T>
int launchLast(const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels, int64_t groups,
               int64_t spatial, float eps, bool silu, cudaStream_t stream) {
  const LastLayout<T> layout(spatial, channels, groups);
  if (layout.groupsPerVec == 0) return static_cast<int>(cudaErrorInvalidValue);
  const T* in = static_cast<const T*>(x);
  const int c = static_cast<int>(channels), cpg = static_cast<int>(channels / groups);
  const dim3 grid(static_cast<unsigned>(layout.chunks), static_cast<unsigned>(n));
  float* partials = scratch;
  float* stats = scratch + 2 * n * groups * layout.chunks;
  switch (layout.groupsPerVec) {
    case 1: lastPartialsKernel<T, 1><<<grid, kThreads, 0, stream>>>(in, partials, spatial, c, cpg, layout.positionsPerBlock); break;
    case 2: lastPartialsKernel<T, 2><<<grid, kThreads, 0, stream>>>(in, partials, spatial, c, cpg, layout.positionsPerBlock); break;
    case 4: lastPartialsKernel<T, 4><<<grid, kThreads, 0, stream>>>(in, partials, spatial, c, cpg, layout.positionsPerBlock); break;
    case 8: lastPartialsKernel<T, 8><<<grid, kThreads, 0, stream>>>(in, partials, spatial, c, cpg, layout.positionsPerBlock); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return static_cast<int>(error);
  lastStatsKernel<T><<<static_cast<unsigned>(n * groups), kThreads, 0, stream>>>(in, partials, stats, spatial, c, cpg, static_cast<int>(layout.chunks), eps);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return static_cast<int>(error);
  const T *w = static_cast<const T*>(weight), *b = static_cast<const T*>(bias);
  T* out = static_cast<T*>(y);
  const size_t shared = 2 * channels * sizeof(float);
  if (silu) {
    lastNormalizeKernel<T, true><<<grid, kThreads, shared, stream>>>(in, w, b, out, stats, spatial, c, cpg, layout.positionsPerBlock);
  } else {
    lastNormalizeKernel<T, false><<<grid, kThreads, shared, stream>>>(in, w, b, out, stats, spatial, c, cpg, layout.positionsPerBlock);
  }
  return static_cast<int>(cudaGetLastError());
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

}  // namespace

int64_t groupNormLastScratchFloats(FloatType type, int64_t n, int64_t channels, int64_t groups, int64_t spatial) {
  return byFloatType(type, [&](auto t) -> int64_t {
    const LastLayout<decltype(t)> layout(spatial, channels, groups);
    return layout.groupsPerVec == 0 ? -1 : 2 * n * groups * (layout.chunks + 1);
  });
}

int groupNormLastRows(FloatType type, const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels,
                      int64_t groups, int64_t spatial, float eps, bool silu, void* stream) {
  return byFloatType(type, [&](auto t) {
    return launchLast<decltype(t)>(x, weight, bias, y, scratch, n, channels, groups, spatial, eps, silu, static_cast<cudaStream_t>(stream));
  });
}

int64_t groupNormScratchFloats(FloatType type, int64_t n, int64_t channels, int64_t groups, int64_t spatial) {
  const int64_t rowLength = channels / groups * spatial;
  return byFloatType(type, [&](auto t) { return 2 * n * groups * chunksPerRow<decltype(t)>(rowLength); });
}

int groupNormRows(FloatType type, const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels,
                  int64_t groups, int64_t spatial, float eps, bool silu, void* stream) {
  return byFloatType(type, [&](auto t) {
    return launch<decltype(t)>(x, weight, bias, y, scratch, n, channels, groups, spatial, eps, silu, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace dtorch::external::cuda::kernels
