// Per-row FP8 quantization of an activation, a warp (short rows) or a block (long ones) per row in one kernel: the row's largest
// magnitude, its scale amax / 448 (amax at least kFp8MinAmax), and the row divided by it, rounded
// to float8_e4m3fn with saturation, as the CPU path's casts compute it (fp8_linear.cpp): the
// row-wise scaled matmul's A operand and its scales. Plain types only: nvcc compiles it without
// LibTorch's headers.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

// The largest finite float8_e4m3fn.
constexpr float kFp8E4m3Max = 448.f;
// A row of zeros gets this amax (a finite scale; its values quantize to 0).
constexpr float kFp8MinAmax = 1e-12f;

// q[r, :] (contiguous [rows, d] bytes), scale[r] (float32) from x's rows, row r at x + r * rowStride
// elements. d a multiple of 16 bytes' worth of elements, x and every row 16-byte aligned (the
// caller checks). Returns the CUDA error of the launch (0: none).
int quantizeRowsFp8(FloatType type, const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, void* stream);

// The longest row (in bytes of x) quantizeGeluRowsFp8 takes: a row is staged in a block's shared
// memory, at most the 48 KiB a launch gets without opting in (24,576 bfloat16 values).
constexpr int kFp8GeluMaxRowBytes = 48 * 1024;

// As quantizeRowsFp8, of gelu(x) with the tanh approximation: each value as LibTorch's CUDA GELU
// computes it (in float, rounded to x's type), so the bytes are those of the GELU's output
// quantized (gelu -> fp8_linear fused by the controller: the GELU's output never goes through
// memory). d · sizeof(element) at most kFp8GeluMaxRowBytes.
int quantizeGeluRowsFp8(FloatType type, const void* x, int64_t rowStride, void* q, float* scale, int64_t rows, int d, void* stream);

}  // namespace dtorch::external::cuda::kernels
