// CLIP's QuickGELU, x · sigmoid(1.702 x), on a GPU through DTorch's one-pass kernel
// (kernels/quick_gelu.cu), with the bits of LibTorch's three kernels.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// quick_gelu(x), contiguous; nullopt where the kernel does not serve x (CPU, other dtypes,
// strided x, a build without CUDA): the caller runs LibTorch's three kernels.
std::optional<at::Tensor> quickGelu(const at::Tensor& x);
// quick_gelu(x) written over x itself; false (nothing written) where the kernel does not serve x.
bool quickGeluInPlace(at::Tensor& x);

}  // namespace dtorch::external::cuda
