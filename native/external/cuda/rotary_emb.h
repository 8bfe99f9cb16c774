// Rotary position embeddings on a GPU through DTorch's row kernel (kernels/rotary_rows.cu): x
// [..., tokens, d] read through any leading strides, cos and sin float32 [tokens, d], the result
// of x's type in x's layout where x is dense (else contiguous), equal to the unfused sequence.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt when the kernel does not serve these inputs (CPU, other dtypes or shapes, misaligned
// rows, DTORCH_ROTARY_KERNEL=0, a build without CUDA): the caller runs the unfused ops instead.
std::optional<at::Tensor> rotaryEmb(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool halves);

}  // namespace dtorch::external::cuda
