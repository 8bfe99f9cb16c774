// cat on a GPU through DTorch's row copy (kernels/cat_rows.cu) where LibTorch's cat would take
// a part through its strides element by element: parts whose rows (the last dim) are contiguous
// but whose leading dims are strided, such as the [B, heads, tokens, D] views of a projection's
// token-major output that attention reads head-major. The result is contiguous, as at::cat
// makes it for such parts, and the same bits (a copy).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace dtorch::external::cuda {

// nullopt when the copy does not serve these parts (CPU, all parts contiguous: LibTorch's own
// vectorized cat serves them; a cat along the last dim; rows not a multiple of 16 bytes or
// misaligned; parts that suggest channels-last, mixed dtypes or devices; a build without CUDA):
// the caller runs at::cat instead.
std::optional<at::Tensor> catRows(const std::vector<at::Tensor>& parts, int64_t dim);

}  // namespace dtorch::external::cuda
