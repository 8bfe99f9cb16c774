// Reductions: sum, mean, any, all over dims (attributes keepdim, ndims, dims...; none listed: all
// dims; mean appends, derived, the count of reduced elements of the full tensor so that a rank
// holding a shard divides by the global count); max/min (values and indices along a dim, or the
// value over all), argmax; softmax and log_softmax along a dim.
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

// any/all: a sharded reduced dim leaves P(max)/P(min) (or and and of the parts).
template <ReduceOp partial>
void logicalReductionRows(const InferContext& ctx, SignatureRows& rows) {
  const bool keepdim = ctx.attr(0) != 0;
  const auto dims = reducedDims(ctx);
  int32_t kept = 0;
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    const bool reduced = isReduced(dims, d);
    rows.push_back(row({Placement::shard(d)}, reduced ? Placement::partial(partial) : Placement::shard(kept)));
    if (!reduced || keepdim) ++kept;
  }
}

// bool, except that uint8 inputs give uint8 (as torch.any and torch.all do)
void inferLogical(const InferContext& ctx, Outputs& out) {
  out.push_back(outputLike(ctx, reducedShape(ctx), ctx.inputs[0]->dtype == DType::Byte ? DType::Byte : DType::Bool));
}

template <bool isAny>
void runLogical(KernelContext& ctx) {
  const bool keepdim = ctx.attr(0) != 0;
  at::Tensor x = ctx.input(0);
  const int64_t count = ctx.intAttr(1);
  if (count == 0) {
    at::Tensor r = isAny ? at::any(x) : at::all(x);
    if (keepdim) r = r.reshape(std::vector<int64_t>(x.dim(), 1));
    ctx.outputs.push_back(r);
    return;
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < count; ++i) dims.push_back(ctx.intAttr(2 + i) < 0 ? ctx.intAttr(2 + i) + x.dim() : ctx.intAttr(2 + i));
  std::sort(dims.rbegin(), dims.rend());  // reduce the last dims first so indices stay valid
  for (int64_t d : dims) x = isAny ? at::any(x, d, keepdim) : at::all(x, d, keepdim);
  ctx.outputs.push_back(x);
}

// ---- max/min/argmax: attributes hasDim, dim, keepdim ------------------------------------------

struct DimArg {
  bool has;
  int64_t dim;
  bool keepdim;
};
DimArg dimArg(const InferContext& ctx) {
  DimArg a{ctx.attr(0) != 0, 0, ctx.attr(2) != 0};
  if (a.has) a.dim = normalizeDim(ctx, ctx.intAttr(1), ctx.inputs[0]->ndim());
  return a;
}
Shape shapeWithout(const Shape& in, int64_t dim, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d != dim) s.push_back(in[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

// max/min: without a dim, the value over everything (0-d); with one, values and indices.
void inferExtreme(const InferContext& ctx, Outputs& out) {
  const DimArg a = dimArg(ctx);
  const TensorMeta& in = *ctx.inputs[0];
  if (!a.has) {
    if (in.numel() == 0) ctx.fail(common::code::kShapeMismatch, "the tensor is empty; give a dim or check the shape");
    out.push_back(outputLike(ctx, Shape(), in.dtype));
    return;
  }
  if (in.ndim() > 0 && in.shape[a.dim] == 0) {
    ctx.fail(common::code::kShapeMismatch, "dim " + std::to_string(a.dim) + " is empty in shape " + formatShape(in.shape));
  }
  out.push_back(outputLike(ctx, shapeWithout(in.shape, a.dim, a.keepdim), in.dtype));
  out.push_back(outputLike(ctx, shapeWithout(in.shape, a.dim, a.keepdim), DType::Long));
}
// Over everything, a sharded tensor leaves each rank a part whose max (min) is the answer; along a
// dim, kept dims stay sharded (indices need the whole reduced dim: it must be Replicate).
template <ReduceOp partial>
void extremeRows(const InferContext& ctx, SignatureRows& rows) {
  const DimArg a = dimArg(ctx);
  int32_t kept = 0;
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (!a.has) rows.push_back(row({Placement::shard(d)}, Placement::partial(partial)));
    else if (d != a.dim) rows.push_back(row({Placement::shard(d)}, Placement::shard(kept)));
    if (!a.has || d != a.dim || a.keepdim) ++kept;
  }
  if (!a.has) rows.push_back(row({Placement::partial(partial)}, Placement::partial(partial)));
}
// The value no element can beat: -inf (or the lowest) for max, +inf (or the highest) for min.
at::Scalar identityOf(at::ScalarType t, bool isMax) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (t) {
    case at::kBool: return at::Scalar(!isMax);
    case at::kByte: return isMax ? at::Scalar(int64_t{0}) : at::Scalar(int64_t{255});
    case at::kChar: return at::Scalar(int64_t{isMax ? -128 : 127});
    case at::kShort: return at::Scalar(int64_t{isMax ? -32768 : 32767});
    case at::kInt: return at::Scalar(static_cast<int64_t>(isMax ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max()));
    case at::kLong: return at::Scalar(isMax ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
    default: return at::Scalar(isMax ? -inf : inf);
  }
}

template <bool isMax>
void runExtreme(KernelContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (ctx.attr(0) == 0) {
    // an empty piece of a sharded tensor holds nothing: the reduction's identity
    if (x.numel() == 0) {
      ctx.outputs.push_back(at::full({}, identityOf(x.scalar_type(), isMax), x.options()));
      return;
    }
    ctx.outputs.push_back(isMax ? at::max(x) : at::min(x));
    return;
  }
  auto [values, indices] = isMax ? at::max(x, ctx.intAttr(1), ctx.attr(2) != 0) : at::min(x, ctx.intAttr(1), ctx.attr(2) != 0);
  ctx.outputs.push_back(values);
  ctx.outputs.push_back(indices);
}

void inferArgmax(const InferContext& ctx, Outputs& out) {
  const DimArg a = dimArg(ctx);
  const TensorMeta& in = *ctx.inputs[0];
  if (in.dtype == DType::Bool) ctx.fail(common::code::kDtypeMismatch, "does not support bool input (as torch.argmax); cast first with .to('int32')");
  if (in.numel() == 0) ctx.fail(common::code::kShapeMismatch, "argmax of an empty tensor");
  Shape shape;
  if (a.has) shape = shapeWithout(in.shape, a.dim, a.keepdim);
  else if (a.keepdim) shape = Shape(in.shape.size(), 1);
  out.push_back(outputLike(ctx, shape, DType::Long));
}
void argmaxRows(const InferContext& ctx, SignatureRows& rows) {
  const DimArg a = dimArg(ctx);
  if (!a.has) return;  // a flat index needs the whole tensor
  int32_t kept = 0;
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (d != a.dim) rows.push_back(row({Placement::shard(d)}, Placement::shard(kept)));
    if (d != a.dim || a.keepdim) ++kept;
  }
}
void runArgmax(KernelContext& ctx) {
  const bool keepdim = ctx.attr(2) != 0;
  ctx.outputs.push_back(ctx.attr(0) != 0 ? at::argmax(ctx.input(0), ctx.intAttr(1), keepdim) : at::argmax(ctx.input(0), std::nullopt, keepdim));
}

// ---- softmax / log_softmax: attribute dim -------------------------------------------------------

void inferSoftmax(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  normalizeDim(ctx, ctx.intAttr(0), in.ndim());
  if (!isFloating(in.dtype)) {
    ctx.fail(common::code::kDtypeMismatch, "needs a floating input, got " + std::string(dtypeName(in.dtype)) + "; cast first with .to('float32')");
  }
  out.push_back(outputLike(ctx, in.shape, in.dtype));
}
// Every dim but the softmax dim may be sharded.
void softmaxRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim());
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (d != dim) rows.push_back(row({Placement::shard(d)}, Placement::shard(d)));
  }
}
void runSoftmax(KernelContext& ctx) { ctx.outputs.push_back(at::softmax(ctx.input(0), ctx.intAttr(0))); }
void runLogSoftmax(KernelContext& ctx) { ctx.outputs.push_back(at::log_softmax(ctx.input(0), ctx.intAttr(0))); }

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
  registry.add({"any", 1, "keepdim, ndims, dims...", inferLogical, runLogical<true>, logicalReductionRows<ReduceOp::kMax>});
  registry.add({"all", 1, "keepdim, ndims, dims...", inferLogical, runLogical<false>, logicalReductionRows<ReduceOp::kMin>});
  registry.add({"max", 1, "hasDim, dim, keepdim", inferExtreme, runExtreme<true>, extremeRows<ReduceOp::kMax>});
  registry.add({"min", 1, "hasDim, dim, keepdim", inferExtreme, runExtreme<false>, extremeRows<ReduceOp::kMin>});
  registry.add({"argmax", 1, "hasDim, dim, keepdim", inferArgmax, runArgmax, argmaxRows});
  registry.add({"softmax", 1, "dim", inferSoftmax, runSoftmax, softmaxRows});
  registry.add({"log_softmax", 1, "dim", inferSoftmax, runLogSoftmax, softmaxRows});
}

}  // namespace dtorch::core
