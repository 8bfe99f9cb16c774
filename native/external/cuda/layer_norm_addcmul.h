// c + layer_norm(x) · b on a GPU through DTorch's row kernel (kernels/layer_norm_addcmul_rows.cu):
// adaLN's modulated, parameter-free layer norm over x's last dim in one pass; and the same
// kernel as an affine layer norm (a weight and a bias), where LibTorch's kernel is slow on short
// inputs such as CLIP's 77 tokens (docs/gpu.md).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <utility>

namespace dtorch::external::cuda {

// nullopt when the kernel does not serve these inputs (CPU, mixed or other dtypes, x not
// contiguous or not [rows, d] / [batch, rows, d], a row too long or not a multiple of 16 bytes,
// c or b misaligned or broadcast along d, a build without CUDA): the caller runs at::layer_norm,
// then addcmul. bOffset 1: c + layer_norm(x) · (b + 1), the sum rounded to the type as
// at::add(b, 1) rounds it (adaLN's 1 + scale, in the same pass). `into`: a view of x's shape to
// write (the first columns of a wider buffer: lora_join's [x | A x]) instead of a new tensor;
// nullopt too when the kernel cannot write there (its rows not 16-byte aligned, or not one after
// another across the batch).
std::optional<at::Tensor> layerNormAddcmul(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps, double bOffset = 0,
                                           const at::Tensor* into = nullptr);

// c + layer_norm(x) · (b + bOffset) as layerNormAddcmul computes it, each row of the result
// quantized to float8_e4m3fn in the same pass as fp8_quantize.h's quantizeRowsFp8 quantizes a
// row (the same bytes and scales): q [tokens, d] and float32 scales [tokens, 1], tokens x's
// leading dims; nullopt for other dtypes than bfloat16 (the FP8 matmul's) and where
// layerNormAddcmul's kernel does not serve the inputs.
std::optional<std::pair<at::Tensor, at::Tensor>> layerNormModulateFp8(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps,
                                                                      double bOffset);

// layer_norm(x) · weight + bias over x's last dim, computed in float as at::layer_norm does (its
// statistics summed in another order: within a rounding of LibTorch's); nullopt as above, or
// when weight and bias are not both [d] of x's dtype: the caller runs at::layer_norm.
std::optional<at::Tensor> layerNormAffine(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

}  // namespace dtorch::external::cuda
