// c + a · b on a GPU through DTorch's row kernel (kernels/addcmul_rows.cu) where some operand is
// one row per batch broadcast over the rows (adaLN's shift, scale and gate): bit-equal to
// at::addcmul, which reads such operands element by element.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt when the kernel does not serve these inputs (CPU, mixed or other dtypes, no operand
// broadcast over rows, a broadcast last dim, misaligned rows, a build without CUDA): the caller
// runs at::addcmul instead.
std::optional<at::Tensor> addcmulRows(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

}  // namespace dtorch::external::cuda
