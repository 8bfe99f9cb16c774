// Group norm over long rows on a GPU through LibTorch's reductions: where each (sample, group)
// row holds tens of thousands of values and there are few rows (a VAE decoder at 1024²: 32 rows
// of 4M values), LibTorch's group_norm gives each row one block, so 32 of the GPU's SMs compute
// the statistics while the rest idle: they were most of a VAE decode's time (docs/gpu.md).
// var_mean splits every row over the whole GPU instead; one addcmul then normalises, scales and
// shifts in float and rounds once into the input's dtype, as LibTorch's kernel does.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt where LibTorch's kernel is the better one (CPU, short rows, many rows): the caller
// runs at::group_norm then.
std::optional<at::Tensor> groupNormLongRows(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& bias, double eps);

}  // namespace dtorch::external::cuda
