// RMS norm over the last dim, one row per group of threads: for short rows such as per-head q/k
// norms (head dim 64..256; up to 1024 16-bit or 512 float32 values), where LibTorch's kernel
// gives a whole block to a row and runs at a fraction of the memory bandwidth. Rows are read
// through the leading dims' strides, so a transposed [B, heads, tokens, D] view of a projection's
// output is normalised and laid out head-major in one pass. Plain types only: nvcc compiles it
// without LibTorch's headers.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"
#include "external/cuda/kernels/rotary_rows.h"
#include "external/cuda/kernels/row_layout.h"

namespace dtorch::external::cuda::kernels {

// The widest row served for a type (16-byte loads, 32 threads, 4 loads each).
int maxRowLength(FloatType type);

// y[r, :] = x_r * rsqrt(mean(x_r²) + eps) * w (w may be null), y contiguous [rows, d], computed
// in float and rounded once. d must be a multiple of 16 bytes' worth of elements and at most
// maxRowLength; x, y, w and every row start 16-byte aligned (the caller checks). Returns the
// CUDA error of the launch (0: none).
int rmsNormRows(FloatType type, const void* x, const void* w, void* y, int64_t rows, int d, const RowLayout& lead, float eps, void* stream);

// The same rows rotated as rotaryRows rotates them (neighbours pair up), each normalised value
// rounded to x's type first as rmsNormRows writes it, so the result is rotaryRows' of
// rmsNormRows' bit for bit: per-head q/k norms and the rotary in one pass. cos and sin float32
// [tokens.tokens, d], contiguous and 16-byte aligned.
int rmsNormRotaryRows(FloatType type, const void* x, const void* w, const float* cos, const float* sin, void* y, int64_t rows, int d,
                      const TokenRows& tokens, const RowLayout& lead, float eps, void* stream);

}  // namespace dtorch::external::cuda::kernels
