// The kernels' dispatch on FloatType (host code of the .cu files): f(T{}) for the element type T.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

template <typename F>
auto byFloatType(FloatType type, F&& f) {
  switch (type) {
    case FloatType::kBFloat16:
      return f(__nv_bfloat16{});
    case FloatType::kFloat16:
      return f(__half{});
    case FloatType::kFloat32:
      break;
  }
  return f(float{});
}

}  // namespace dtorch::external::cuda::kernels
