// Helpers shared by the op families' meta inference: broadcasting, type promotion, dims,
// and the placement rule every op of this slice follows.
#pragma once
#include <ATen/core/Scalar.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <vector>

#include "core/operators/op.h"

namespace dtorch::core {

// PyTorch's broadcasting; on failure names both shapes and the clashing dim.
Shape broadcastShapes(const InferContext& ctx, const Shape& a, const Shape& b);

// A JS number operand: integral values act as Python ints, others as floats.
enum class ScalarKind { kInt, kFloat, kBool };

// The kind a JS number stands for (scalar.ts's scalarKindOf): an int when integral and inside
// int64, else a float.
ScalarKind kindOfNumber(double value);
// A JS number as the Python scalar it stands for, so that LibTorch's checked conversions apply
// Python's rules (an int wraps into uint8 from -255 on, a float does not).
at::Scalar numberScalar(double value);
// Whether `value` (of `kind`) converts to `dtype` without overflow, by LibTorch's own rule
// (c10::checked_convert, as fill_ and masked_fill_ apply it), plus the double 2^63 that this rule
// lets through into int64 (where the cast is undefined).
bool scalarFits(double value, ScalarKind kind, DType dtype);

// Products and sums of sizes that fail (SHAPE_MISMATCH) instead of overflowing int64.
int64_t checkedMul(const InferContext& ctx, int64_t a, int64_t b);
int64_t checkedAdd(const InferContext& ctx, int64_t a, int64_t b);

// PyTorch's result_type: dim tensors outrank 0-d tensors, which outrank scalars,
// except that a higher category (bool < int < float) always wins.
DType resultType(c10::ArrayRef<const TensorMeta*> tensors, c10::ArrayRef<ScalarKind> scalars);

// Normalises a possibly negative dim against ndim, failing with the legal range.
int64_t normalizeDim(const InferContext& ctx, int64_t dim, int64_t ndim);

// All inputs on one mesh; returns that mesh id.
int commonMesh(const InferContext& ctx);

// Output meta on the inputs' mesh; its placements come from the op's signature rows. Fails
// when the tensor would hold more bytes than 63 bits count (LibTorch's storage size, memory()).
TensorMeta outputLike(const InferContext& ctx, Shape shape, DType dtype);
// The same check for metas made otherwise (creation ops).
void checkByteCount(const InferContext& ctx, const Shape& shape, DType dtype);

// c + product, for fused kernels on their unfused path: in the product's buffer when it has the
// output's shape and dtype (as the unfused add would have reused it), else a new tensor. Addition
// commutes, so the bits equal the unfused add whichever side c was on.
at::Tensor addToProduct(const KernelContext& ctx, at::Tensor product, const at::Tensor& c);

// A norm kernel's attributes (nNorm, normalizedShape..., hasWeight, hasBias, eps) and its
// optional weight and bias, the tensor inputs from `firstOptional` on (1 for layer_norm and
// rms_norm; after the other inputs of the ops a norm is fused into).
struct NormArgs {
  std::vector<int64_t> shape;
  std::optional<at::Tensor> weight, bias;
  double eps;
};
NormArgs normArgs(const KernelContext& ctx, size_t firstOptional);

// c + layer_norm(x) · (b + bOffset) for a node whose inputs are (c, x, b, weight?, bias?, ...)
// and whose attributes are the norm's (layer_norm_addcmul, layer_norm_modulate and its join):
// DTorch's row kernel on GPUs, written into `into` (a view of x's shape) where it can; else
// layer_norm, then addcmul, bit-identical to those ops on CPUs. The result is `into` itself only
// when the kernel wrote there.
at::Tensor modulatedLayerNorm(const KernelContext& ctx, double bOffset, const at::Tensor* into = nullptr);

// The infer of ops that only the controller's fusion forms (runner/fusion.h): recording one fails.
void inferFormedByFusion(const InferContext& ctx, Outputs& out);

// matmul and linear: LibTorch multiplies no bool tensors, and on CUDA no integer ones (cuBLAS
// has no integer gemm behind addmm): refused at the call instead of by the kernel.
void checkMatmulDtype(const InferContext& ctx, DType dtype);

// Checks one placement per mesh dim and shard dims inside the tensor's rank.
void checkPlacements(const InferContext& ctx, const Placements& placements, const DeviceMesh& mesh, int64_t ndim);

}  // namespace dtorch::core
