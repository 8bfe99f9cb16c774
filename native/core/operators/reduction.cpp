// Reductions over dims (none listed: all dims), with keepdim.
// Attribute layout: keepdim, ndims, dims...
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

// Normalised, de-duplicated reduced dims; empty attribute list means every dim.
c10::SmallVector<int64_t, 6> reducedDims(const InferContext& ctx) {
  const int64_t ndim = ctx.inputs[0]->ndim();
  const int64_t count = ctx.intAttr(1);
  c10::SmallVector<int64_t, 6> dims;
  if (count == 0) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t d = normalizeDim(ctx, ctx.intAttr(2 + i), ndim);
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      ctx.fail(common::code::kInvalidArgument, "dim " + std::to_string(d) + " appears more than once");
    }
    dims.push_back(d);
  }
  return dims;
}

Shape reducedShape(const InferContext& ctx) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = reducedDims(ctx);
  Shape shape;
  const Shape& in = ctx.inputs[0]->shape;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) shape.push_back(in[d]);
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

void inferSum(const InferContext& ctx, Outputs& out) {
  const DType in = ctx.inputs[0]->dtype;
  // as torch.sum: integer and bool inputs accumulate in int64
  out.push_back(outputLike(ctx, reducedShape(ctx), c10::isIntegralType(in, /*includeBool=*/true) ? DType::Long : in));
}

at::DimVector kernelDims(const KernelContext& ctx) {
  at::DimVector dims;
  for (int64_t i = 0; i < ctx.intAttr(1); ++i) dims.push_back(ctx.intAttr(2 + i));
  return dims;
}

void runSum(KernelContext& ctx) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = kernelDims(ctx);
  ctx.outputs.push_back(dims.empty() && !keepdim ? at::sum(ctx.input(0)) : at::sum(ctx.input(0), dims, keepdim));
}

}  // namespace

void registerReductionOps(OpRegistry& registry) {
  registry.add({"sum", 1, "keepdim, ndims, dims...", inferSum, runSum});
}

}  // namespace dtorch::core
