// A floating tensor plus or times a scalar, for small contiguous tensors: there LibTorch's
// elementwise path (TensorIterator set-up, then the launch) costs several times what the GPU
// spends on the work, and an op's cost is its host time. Computed in float and rounded once to
// the tensor's type, as LibTorch computes float16 and bfloat16 (x * 0.1 is float(x) * 0.1f).
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

enum class ScalarOp { kAdd, kMul };

// y[i] = x[i] + value or x[i] * value for i < n (y may be x); x and y contiguous, n < 2^31.
// Returns the CUDA error of the launch (0: none).
int scalarOp(ScalarOp op, FloatType type, const void* x, void* y, int64_t n, float value, void* stream);

}  // namespace dtorch::external::cuda::kernels
