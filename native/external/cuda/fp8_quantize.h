// Per-row FP8 quantization of an activation on a GPU through DTorch's own kernel
// (kernels/fp8_rows.cu): the A operand of a row-wise scaled matmul and its scales, in one pass.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <utility>

namespace dtorch::external::cuda {

// x [rows, d] (last dim contiguous) as float8_e4m3fn [rows, d] and float32 scales [rows, 1];
// nullopt when the kernel does not serve it (CPU, other dtypes, misaligned or odd rows, a build
// without CUDA): the caller quantizes with LibTorch's ops instead.
std::optional<std::pair<at::Tensor, at::Tensor>> quantizeRowsFp8(const at::Tensor& x);

// The same of gelu(x, tanh) (the GELU applied as the kernel reads x, LibTorch's CUDA GELU's
// values); nullopt also for rows longer than the kernel stages (kFp8GeluMaxRowBytes).
std::optional<std::pair<at::Tensor, at::Tensor>> quantizeGeluRowsFp8(const at::Tensor& x);

}  // namespace dtorch::external::cuda
