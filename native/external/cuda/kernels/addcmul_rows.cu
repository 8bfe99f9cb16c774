#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "external/cuda/kernels/addcmul_rows.h"
#include "external/cuda/kernels/float_convert.cuh"
#include "external/cuda/kernels/row_operand.cuh"

namespace dtorch::external::cuda::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per 16 bytes of output; Index narrows the divisions where the sizes fit 32 bits.
template <typename T, typename Index>
__global__ void __launch_bounds__(kThreads) addcmulRowsKernel(RowOperand c, RowOperand a, RowOperand b, T* __restrict__ y, Index rows, Index vecsPerRow,
                                                              int64_t total) {
  constexpr int VEC = Pack<T>::kVec;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (thread >= total) return;
  const Index vec = static_cast<Index>(thread) % vecsPerRow;
  const Index line = static_cast<Index>(thread) / vecsPerRow;  // batch * rows + row
  const int64_t batch = line / rows, row = line % rows, col = static_cast<int64_t>(vec) * VEC;
  const Pack<T> pc = load<T>(c, batch, row, col), pa = load<T>(a, batch, row, col), pb = load<T>(b, batch, row, col);
  Pack<T> out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) out.v[i] = fromFloat<T>(__fmaf_rn(toFloat(pa.v[i]), toFloat(pb.v[i]), toFloat(pc.v[i])));  // at::addcmul's fma
  *reinterpret_cast<uint4*>(y + thread * VEC) = out.raw;
}

template <typename T>
int launch(RowOperand c, RowOperand a, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, cudaStream_t stream) {
  constexpr int VEC = Pack<T>::kVec;
  const int64_t vecsPerRow = d / VEC, total = batch * rows * vecsPerRow;
  const auto blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  T* ys = static_cast<T*>(y);
  if (total <= UINT32_MAX) {
    addcmulRowsKernel<T, uint32_t><<<blocks, kThreads, 0, stream>>>(c, a, b, ys, static_cast<uint32_t>(rows), static_cast<uint32_t>(vecsPerRow), total);
  } else {
    addcmulRowsKernel<T, uint64_t><<<blocks, kThreads, 0, stream>>>(c, a, b, ys, static_cast<uint64_t>(rows), static_cast<uint64_t>(vecsPerRow), total);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int addcmulRows(FloatType type, RowOperand c, RowOperand a, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case FloatType::kFloat32:
      return launch<float>(c, a, b, y, batch, rows, d, s);
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16>(c, a, b, y, batch, rows, d, s);
    case FloatType::kFloat16:
      return launch<__half>(c, a, b, y, batch, rows, d, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dtorch::external::cuda::kernels
