// c + layer_norm(x) · b over [batch, rows, d] in one pass: adaLN's modulation of a parameter-free
// layer norm, norm(x) · (1 + scale) + shift, where c and b are whole or one row per batch
// broadcast over the rows (RowOperand, as addcmul_rows.h). One warp per row keeps the row in
// registers between its statistics and its output, so x is read once and y written once, where
// the layer norm and addcmul kernels it replaces go through memory twice. The norm is rounded
// to the type before the multiply-add, as the two kernels round it. Plain types only.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/addcmul_rows.h"
#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

// The longest row the kernel takes (elements of `type`).
int maxLayerNormRow(FloatType type);

// x contiguous [batch, rows, d]; y the same, or rows `yRowStride` elements apart (0: d) one after
// another across the batch (the first d columns of a wider buffer); d a multiple of 16 bytes' worth of elements, at most
// maxLayerNormRow; every pointer and stride 16-byte aligned (the caller checks). Returns the
// CUDA error of the launch (0: none). roundNorm false: the norm is not rounded before the
// multiply-add, which is then an affine layer norm's (b its weight, c its bias), as
// at::layer_norm computes it in float. bOffset: b + bOffset, rounded to the type, multiplies
// instead of b (adaLN's 1 + scale, the add it replaces folded in).
int layerNormAddcmulRows(FloatType type, const void* x, RowOperand c, RowOperand b, void* y, int64_t batch, int64_t rows, int64_t d, float eps,
                         void* stream, bool roundNorm = true, float bOffset = 0.f, int64_t yRowStride = 0);

// adaLN's modulated norm as above (roundNorm, b + bOffset), each output row, rounded to the type
// as y's would be, quantized to float8_e4m3fn as quantizeRowsFp8 quantizes it (fp8_rows.h): its
// largest magnitude amax, scale[r] = max(amax, kFp8MinAmax) / 448, q[r, :] the row divided by it
// with saturation (q contiguous [batch · rows, d] bytes). The row stays in the warp's registers
// between the norm and its bytes, so the norm's output never goes through memory (an FP8 linear's
// input: layer_norm_modulate -> fp8_linear fused by the controller). bfloat16 x only (the FP8
// matmul's activations); returns the CUDA error of the launch (invalid value for other types).
int layerNormModulateFp8Rows(FloatType type, const void* x, RowOperand c, RowOperand b, uint8_t* q, float* scale, int64_t batch, int64_t rows, int64_t d,
                             float eps, float bOffset, void* stream);

}  // namespace dtorch::external::cuda::kernels
