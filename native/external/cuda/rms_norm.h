// RMS norm over the last dim on a GPU through DTorch's own row kernel (kernels/rms_norm_rows.cu),
// where it serves the input: short rows (per-head q/k norms) read through any leading strides,
// written contiguous in the input's logical order (what at::rms_norm returns).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt when the kernel does not serve these inputs (CPU, long or odd rows, other dtypes,
// misaligned rows, a build without CUDA): the caller runs at::rms_norm instead.
std::optional<at::Tensor> rmsNormLastDim(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);

// The same rows then rotated as rotaryEmb(·, cos, sin, halves=false, tokensFromEnd) rotates them
// (rotary_emb.h), in one pass, bit for bit the two kernels' result (rms_norm_rotary_emb: per-head
// q/k norms and the rotary); nullopt where either kernel would not serve the inputs.
std::optional<at::Tensor> rmsNormRotaryLastDim(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps, const at::Tensor& cos,
                                               const at::Tensor& sin, int64_t tokensFromEnd);

}  // namespace dtorch::external::cuda
