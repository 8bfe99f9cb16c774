// Group norm over long rows on a GPU: where each (sample, group) row holds tens of thousands of
// values and there are few rows (a VAE decoder at 1024²: 32 rows of 4M values), LibTorch's
// group_norm gives each row one block, so 32 of the GPU's SMs compute the statistics while the
// rest idle: they were most of a VAE decode's time (docs/gpu.md). DTorch's two-pass kernel
// (kernels/group_norm_rows.h) splits every row over the whole GPU instead, then normalises, scales
// and shifts in float and rounds once into the input's dtype, as LibTorch's kernel does; inputs
// it does not take (neither contiguous nor channels last, odd sizes) go through var_mean and one
// addcmul. A channels-last input takes the kernel at any row length.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt where LibTorch's kernel is the better one (CPU, short rows, many rows): the caller
// runs at::group_norm then.
std::optional<at::Tensor> groupNormLongRows(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& bias, double eps);

// silu(group_norm(x)) in one pass of DTorch's kernel after its statistics (the op group_norm_silu,
// formed by fusion: a VAE resnet block's norm and activation), for any row length: x of a 16- or
// 32-bit float type on a GPU, either contiguous [N, C, ...] with its spatial size a multiple of 16
// bytes' worth of values, or a 4-d tensor channels last with C so (kernels/group_norm_rows.h);
// weight and bias of x's type. nullopt elsewhere: the caller runs the two ops.
std::optional<at::Tensor> groupNormSilu(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                        const std::optional<at::Tensor>& bias, double eps);

}  // namespace dtorch::external::cuda
