// CLIP's QuickGELU, x · sigmoid(1.702 x), on a GPU through DTorch's one-pass kernel
// (kernels/quick_gelu.cu), with the bits of LibTorch's three kernels.
#pragma once
#include <ATen/core/Tensor.h>

namespace dtorch::external::cuda {

// Writes quick_gelu(x) into `out` (x's shape and dtype, contiguous; may be x itself) and returns
// true; false where the kernel does not serve them (CPU, other dtypes, strided x, a build
// without CUDA): then nothing was written, and the caller runs LibTorch's three kernels.
bool quickGeluInto(at::Tensor& out, const at::Tensor& x);

}  // namespace dtorch::external::cuda
