// x · sigmoid(1.702 x) (CLIP's QuickGELU) in one pass, with LibTorch's three kernels' roundings
// (the product 1.702 x, then the sigmoid, each rounded to the type; then the product), where
// LibTorch runs three kernels and goes through memory three times.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

// x and y contiguous, n elements (y may be x). Returns the CUDA error of the launch (0: none).
int quickGelu(FloatType type, const void* x, void* y, int64_t n, void* stream);

}  // namespace dtorch::external::cuda::kernels
