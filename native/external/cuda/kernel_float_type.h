// The FloatType DTorch's CUDA kernels take for a LibTorch dtype (kernels/float_type.h), for the
// launchers that check their inputs before handing them to a kernel.
#pragma once
#include <c10/core/ScalarType.h>

#include <optional>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda {

// nullopt: a dtype no kernel takes (the caller runs LibTorch's op instead).
inline std::optional<kernels::FloatType> kernelFloatType(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float: return kernels::FloatType::kFloat32;
    case c10::ScalarType::BFloat16: return kernels::FloatType::kBFloat16;
    case c10::ScalarType::Half: return kernels::FloatType::kFloat16;
    default: return std::nullopt;
  }
}

}  // namespace dtorch::external::cuda
