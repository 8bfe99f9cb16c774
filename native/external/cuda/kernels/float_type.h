// The floating types DTorch's own CUDA kernels take (plain enum: the kernels compile without
// LibTorch's headers).
#pragma once

namespace dtorch::external::cuda::kernels {

enum class FloatType { kFloat32, kBFloat16, kFloat16 };

}  // namespace dtorch::external::cuda::kernels
