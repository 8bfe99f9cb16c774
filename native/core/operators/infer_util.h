// Helpers shared by the op families' meta inference: broadcasting, type promotion, dims,
// and the placement rule every op of this slice follows.
#pragma once
#include <c10/util/ArrayRef.h>

#include <optional>

#include "core/operators/op.h"

namespace dtorch::core {

// PyTorch's broadcasting; on failure names both shapes and the clashing dim.
Shape broadcastShapes(const InferContext& ctx, const Shape& a, const Shape& b);

// A JS number operand: integral values act as Python ints, others as floats.
enum class ScalarKind { kInt, kFloat, kBool };

// PyTorch's result_type: dim tensors outrank 0-d tensors, which outrank scalars,
// except that a higher category (bool < int < float) always wins.
DType resultType(c10::ArrayRef<const TensorMeta*> tensors, c10::ArrayRef<ScalarKind> scalars);

// Normalises a possibly negative dim against ndim, failing with the legal range.
int64_t normalizeDim(const InferContext& ctx, int64_t dim, int64_t ndim);

// All inputs on one mesh; returns that mesh id.
int commonMesh(const InferContext& ctx);

// Output meta on the inputs' mesh; its placements come from the op's signature rows.
TensorMeta outputLike(const InferContext& ctx, Shape shape, DType dtype);

// c + product, for fused kernels on their unfused path: in the product's buffer when it has the
// output's shape and dtype (as the unfused add would have reused it), else a new tensor. Addition
// commutes, so the bits equal the unfused add whichever side c was on.
at::Tensor addToProduct(const KernelContext& ctx, at::Tensor product, const at::Tensor& c);

// The infer of ops that only the controller's fusion forms (runner/fusion.h): recording one fails.
void inferFormedByFusion(const InferContext& ctx, Outputs& out);

// Checks one placement per mesh dim and shard dims inside the tensor's rank.
void checkPlacements(const InferContext& ctx, const Placements& placements, const DeviceMesh& mesh, int64_t ndim);

}  // namespace dtorch::core
