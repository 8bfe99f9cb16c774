// A tensor plus or times a scalar on a GPU through DTorch's own kernel
// (kernels/scalar_elementwise.cu), where it serves: small contiguous float32, bfloat16 and
// float16 tensors whose result keeps their dtype. There an op costs its host time, and
// LibTorch's elementwise set-up is most of it.
#pragma once
#include <ATen/core/Tensor.h>

namespace dtorch::external::cuda {

enum class ScalarOpKind { kAdd, kMul };

// Writes x + value (kAdd) or x * value (kMul) into `out` (x's shape and dtype; may be x itself)
// and returns true; false where the kernel does not serve them (then nothing was written, and
// the caller runs LibTorch's kernel). The value is rounded to float32, as LibTorch does for
// these dtypes.
bool scalarOpInto(at::Tensor& out, const at::Tensor& x, ScalarOpKind op, double value);

}  // namespace dtorch::external::cuda
