// c + layer_norm(x) · b on a GPU through DTorch's row kernel (kernels/layer_norm_addcmul_rows.cu):
// adaLN's modulated, parameter-free layer norm over x's last dim in one pass.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt when the kernel does not serve these inputs (CPU, mixed or other dtypes, x not
// contiguous or not [rows, d] / [batch, rows, d], a row too long or not a multiple of 16 bytes,
// c or b misaligned or broadcast along d, a build without CUDA): the caller runs at::layer_norm,
// then addcmul.
std::optional<at::Tensor> layerNormAddcmul(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps);

}  // namespace dtorch::external::cuda
