// Rotary position embeddings on a GPU in one pass, as diffusers' apply_rotary_emb (use_real):
// y = x·cos + rotate(x)·sin over the last dim, each product and the sum rounded in float32 as
// eager PyTorch rounds them (x.float() * cos + rotated.float() * sin), then once to x's type.
// Eager PyTorch runs that as about eight kernels over the whole tensor; here rows are read
// through the leading dims' strides (a transposed [B, heads, tokens, D] view) and written
// either contiguous in logical order or in x's own layout. Plain types only: nvcc compiles it without LibTorch's headers.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"
#include "external/cuda/kernels/row_layout.h"

namespace dtorch::external::cuda::kernels {

// The row of cos and sin each row of x reads: x's rows (row-major over its leading dims) run
// `inner` to a token (the dims between the tokens and the last: the heads of [B, S, H, D]; 1 for
// [..., S, D]), and the tokens repeat every `tokens` (over the dims before them).
struct TokenRows {
  int64_t tokens = 1;
  int64_t inner = 1;
};

// x: rows of d elements (lead: the leading dims, among them the tokens: `tokens`);
// cos, sin: float32 [tokens.tokens, d] contiguous; y: x's type, contiguous [rows, d] or, with sameLayout,
// laid out as x (each row at x's row offset: x must then be dense). halves: the two
// halves of a row pair up (unbind dim -2), else neighbours (-1). d must be a multiple of 16
// bytes' worth of x's elements (twice that for halves); x, y, cos, sin and every row start
// 16-byte aligned (the caller checks). Returns the CUDA error of the launch (0: none).
int rotaryRows(FloatType type, const void* x, const float* cos, const float* sin, void* y, int64_t rows, int d, const TokenRows& tokens, bool halves,
               const RowLayout& lead, bool sameLayout, void* stream);

}  // namespace dtorch::external::cuda::kernels
