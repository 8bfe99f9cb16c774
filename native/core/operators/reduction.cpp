// Reductions over dims (none listed: all dims), with keepdim: sum and mean.
// Attribute layout: keepdim, ndims, dims...; mean appends (derived) the count of reduced
// elements of the full tensor, so that a rank holding a shard divides by the global count.
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

bool isReduced(const c10::SmallVector<int64_t, 6>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

Shape reducedShape(const InferContext& ctx) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = reducedDims(ctx);
  Shape shape;
  const Shape& in = ctx.inputs[0]->shape;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (!isReduced(dims, d)) shape.push_back(in[d]);
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

// A sharded reduced dim leaves each rank a partial result (Partial(sum): mean divides by the
// global count); a sharded kept dim stays sharded at its new index. Partials stay partial.
void reductionRows(const InferContext& ctx, SignatureRows& rows) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = reducedDims(ctx);
  int32_t kept = 0;
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (isReduced(dims, d)) {
      rows.push_back(row({Placement::shard(d)}, Placement::partial(ReduceOp::kSum)));
    } else {
      rows.push_back(row({Placement::shard(d)}, Placement::shard(kept)));
    }
    if (!isReduced(dims, d) || keepdim) ++kept;
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) rows.push_back(row({Placement::partial(op)}, Placement::partial(op)));
}

void inferSum(const InferContext& ctx, Outputs& out) {
  const DType in = ctx.inputs[0]->dtype;
  // as torch.sum: integer and bool inputs accumulate in int64
  out.push_back(outputLike(ctx, reducedShape(ctx), c10::isIntegralType(in, /*includeBool=*/true) ? DType::Long : in));
}

void inferMean(const InferContext& ctx, Outputs& out) {
  const DType in = ctx.inputs[0]->dtype;
  if (!isFloating(in)) {
    ctx.fail(common::code::kDtypeMismatch, "mean needs a floating input, got " + std::string(dtypeName(in)) +
                                               "; cast first with .to('float32')");
  }
  double count = 1;
  for (int64_t d : reducedDims(ctx)) count *= static_cast<double>(ctx.inputs[0]->shape[d]);
  ctx.derived.push_back(count);
  out.push_back(outputLike(ctx, reducedShape(ctx), in));
}

at::DimVector kernelDims(const KernelContext& ctx) {
  at::DimVector dims;
  for (int64_t i = 0; i < ctx.intAttr(1); ++i) dims.push_back(ctx.intAttr(2 + i));
  return dims;
}

at::Tensor localSum(const KernelContext& ctx, std::optional<at::ScalarType> dtype = std::nullopt) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = kernelDims(ctx);
  return dims.empty() && !keepdim ? at::sum(ctx.input(0), dtype) : at::sum(ctx.input(0), dims, keepdim, dtype);
}

void runSum(KernelContext& ctx) { ctx.outputs.push_back(localSum(ctx)); }

// Local sum over the global count: right whether or not the reduced dims are sharded here.
void runMean(KernelContext& ctx) {
  const double count = ctx.node.attrs.back();
  at::Tensor sum = localSum(ctx);
  ctx.outputs.push_back(count > 0 ? sum.div_(count) : sum.fill_(std::numeric_limits<double>::quiet_NaN()));
}

}  // namespace

void registerReductionOps(OpRegistry& registry) {
  registry.add({"sum", 1, "keepdim, ndims, dims...", inferSum, runSum, reductionRows});
  registry.add({"mean", 1, "keepdim, ndims, dims... (+ reduced count)", inferMean, runMean, reductionRows});
}

}  // namespace dtorch::core
