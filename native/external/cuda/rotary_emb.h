// Rotary position embeddings on a GPU through DTorch's row kernel (kernels/rotary_rows.cu): x
// [..., tokens, ..., d] (the tokens `tokensFromEnd` dims from the end: 2 for [..., tokens, d])
// read through any leading strides, cos and sin float32 [tokens, d], the result of x's type in
// x's layout where x is dense (else contiguous), equal to the unfused sequence.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

#include "external/cuda/kernels/rotary_rows.h"

namespace dtorch::external::cuda {

// Where x's rows meet the tables (kernels::TokenRows): nullopt unless cos and sin are float32
// [tokens, d], contiguous, on x's device, 16-byte aligned, and tokensFromEnd names a dim of x
// before its last.
std::optional<kernels::TokenRows> tokenRowsOf(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t tokensFromEnd);

// nullopt when the kernel does not serve these inputs (CPU, other dtypes or shapes, misaligned
// rows, DTORCH_ROTARY_KERNEL=0, a build without CUDA): the caller runs the unfused ops instead.
std::optional<at::Tensor> rotaryEmb(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool halves, int64_t tokensFromEnd = 2);

}  // namespace dtorch::external::cuda
