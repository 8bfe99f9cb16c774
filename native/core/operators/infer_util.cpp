#include "core/operators/infer_util.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/util/overflows.h>

#include <cmath>

#include "common/error.h"
#include "core/operand/mesh_table.h"

namespace dtorch::core {

using common::code::kMeshMismatch;
using common::code::kPlacementMismatch;
using common::code::kShapeMismatch;

double InferContext::attr(size_t i) const {
  if (i >= attrs.size()) {
    fail(common::code::kInvalidArgument,
         "expected attribute #" + std::to_string(i) + " (" + std::string(op.attrs) + "), got " +
             std::to_string(attrs.size()) + " attributes");
  }
  return attrs[i];
}

int64_t InferContext::intAttr(size_t i) const {
  const double v = attr(i);
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (!(std::abs(v) < kExact) || v != std::trunc(v)) {
    fail(common::code::kInvalidArgument, "attribute #" + std::to_string(i) + " (" + std::string(op.attrs) +
                                             ") must be an integer of magnitude below 2^53, got " + std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

ScalarKind kindOfNumber(double value) {
  constexpr double k63 = 9223372036854775808.0;  // 2^63
  return value == std::trunc(value) && value >= -k63 && value < k63 ? ScalarKind::kInt : ScalarKind::kFloat;
}

at::Scalar numberScalar(double value) {
  return kindOfNumber(value) == ScalarKind::kInt ? at::Scalar(static_cast<int64_t>(value)) : at::Scalar(value);
}

bool scalarFits(double value, ScalarKind kind, DType dtype) {
  if (kind == ScalarKind::kBool || dtype == DType::Bool) return true;
  if (kind == ScalarKind::kInt && kindOfNumber(value) != ScalarKind::kInt) return false;
  constexpr double k63 = 9223372036854775808.0;
  if (c10::isIntegralType(dtype, /*includeBool=*/false) && kind == ScalarKind::kFloat && !(value >= -k63 && value < k63)) return false;
  bool overflows = false;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "scalarFits", [&] {
    overflows = kind == ScalarKind::kInt ? c10::overflows<scalar_t, int64_t>(static_cast<int64_t>(value)) : c10::overflows<scalar_t, double>(value);
  });
  return !overflows;
}

int64_t checkedMul(const InferContext& ctx, int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    ctx.fail(kShapeMismatch, std::to_string(a) + " x " + std::to_string(b) + " elements overflow 64-bit sizes");
  }
  return r;
}

int64_t checkedAdd(const InferContext& ctx, int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) ctx.fail(kShapeMismatch, std::to_string(a) + " + " + std::to_string(b) + " overflows 64-bit sizes");
  return r;
}

void InferContext::fail(const char* code, const std::string& message) const {
  common::fail(code, std::string(op.name) + ": " + message);
}

Shape broadcastShapes(const InferContext& ctx, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      ctx.fail(kShapeMismatch, "shapes " + formatShape(a) + " and " + formatShape(b) +
                                   " cannot be broadcast: dim " + std::to_string(-static_cast<int64_t>(i) - 1) +
                                   " has sizes " + std::to_string(da) + " and " + std::to_string(db) +
                                   " (sizes must match or one of them be 1)");
    }
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

namespace {
// Mirrors at::native's combine_categories.
DType combineCategories(DType higher, DType lower) {
  if (higher == DType::Undefined) return lower;
  if (c10::isFloatingType(higher)) return higher;
  if (higher == DType::Bool || c10::isFloatingType(lower)) {
    return lower == DType::Undefined ? higher : c10::promoteTypes(higher, lower);
  }
  return higher;
}
DType promoteSkipUndefined(DType a, DType b) {
  if (a == DType::Undefined) return b;
  if (b == DType::Undefined) return a;
  return c10::promoteTypes(a, b);
}
}  // namespace

DType resultType(c10::ArrayRef<const TensorMeta*> tensors, c10::ArrayRef<ScalarKind> scalars) {
  DType dimResult = DType::Undefined, zeroResult = DType::Undefined, wrappedResult = DType::Undefined;
  for (const TensorMeta* t : tensors) {
    if (t->ndim() > 0) dimResult = promoteSkipUndefined(dimResult, t->dtype);
    else zeroResult = promoteSkipUndefined(zeroResult, t->dtype);
  }
  for (ScalarKind s : scalars) {
    const DType d = s == ScalarKind::kFloat ? DType::Float : s == ScalarKind::kInt ? DType::Long : DType::Bool;
    wrappedResult = promoteSkipUndefined(wrappedResult, d);
  }
  return combineCategories(dimResult, combineCategories(zeroResult, wrappedResult));
}

int64_t normalizeDim(const InferContext& ctx, int64_t dim, int64_t ndim) {
  const int64_t bound = std::max<int64_t>(ndim, 1);
  if (dim < -bound || dim >= bound) {
    ctx.fail(common::code::kInvalidArgument, "dim " + std::to_string(dim) + " is out of range for a " +
                                                 std::to_string(ndim) + "-d tensor (expected a dim in [" +
                                                 std::to_string(-bound) + ", " + std::to_string(bound - 1) + "])");
  }
  return dim < 0 ? dim + bound : dim;
}

int commonMesh(const InferContext& ctx) {
  if (ctx.inputs.empty()) return 0;
  const int mesh = ctx.inputs[0]->meshId;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i]->meshId != mesh) {
      ctx.fail(kMeshMismatch, "input #0 lives on mesh " + std::to_string(mesh) + " but input #" + std::to_string(i) +
                                  " lives on mesh " + std::to_string(ctx.inputs[i]->meshId) +
                                  "; move one with redistribute(mesh, placements) first");
    }
  }
  return mesh;
}

void checkByteCount(const InferContext& ctx, const Shape& shape, DType dtype) {
  // in doubles: the product of int64 sizes may itself overflow
  double bytes = static_cast<double>(dtypeSize(dtype));
  for (int64_t s : shape) bytes *= static_cast<double>(s);
  if (bytes >= 9.2e18) {
    ctx.fail(common::code::kInvalidArgument, "shape " + formatShape(shape) + " holds more bytes than 64-bit sizes can count");
  }
}

TensorMeta outputLike(const InferContext& ctx, Shape shape, DType dtype) {
  checkByteCount(ctx, shape, dtype);
  TensorMeta out;
  out.shape = std::move(shape);
  out.dtype = dtype;
  out.meshId = commonMesh(ctx);
  return out;
}

void checkMatmulDtype(const InferContext& ctx, DType dtype) {
  if (dtype == DType::Bool) {
    ctx.fail(common::code::kDtypeMismatch, "is not defined for bool tensors (LibTorch has no bool kernel); cast first with .to('int32')");
  }
  if (c10::isIntegralType(dtype, /*includeBool=*/false) && ctx.meshes.get(commonMesh(ctx)).kind == DeviceKind::kCuda) {
    ctx.fail(common::code::kDtypeMismatch, "of " + std::string(dtypeName(dtype)) + " tensors has no CUDA kernel (cuBLAS multiplies floats); cast first with .to('float32')");
  }
}

void checkPlacements(const InferContext& ctx, const Placements& placements, const DeviceMesh& mesh, int64_t ndim) {
  if (static_cast<int>(placements.size()) != mesh.ndim()) {
    ctx.fail(kPlacementMismatch, "got " + std::to_string(placements.size()) + " placements for a " +
                                     std::to_string(mesh.ndim()) + "-d mesh; give one placement per mesh dim");
  }
  for (const Placement& p : placements) {
    if (p.isShard() && p.dim >= ndim) {
      ctx.fail(kPlacementMismatch, "placement " + p.shortName() + " shards dim " + std::to_string(p.dim) + " of a " +
                                       std::to_string(ndim) + "-d tensor; shard a dim in [0, " + std::to_string(ndim) +
                                       ") (negative dims count from the end)");
    }
  }
}

at::Tensor addToProduct(const KernelContext& ctx, at::Tensor product, const at::Tensor& c) {
  const bool intoProduct = product.scalar_type() == ctx.outputMeta().dtype && product.sizes() == at::IntArrayRef(ctx.outputPiece().shape);
  return intoProduct ? product.add_(c) : at::add(c, product);
}

NormArgs normArgs(const KernelContext& ctx, size_t firstOptional) {
  NormArgs a;
  const int64_t n = ctx.intAttr(0);
  for (int64_t i = 0; i < n; ++i) a.shape.push_back(ctx.intAttr(1 + i));
  size_t next = firstOptional;
  if (ctx.attr(1 + n) != 0) a.weight = ctx.input(next++);
  if (ctx.attr(2 + n) != 0) a.bias = ctx.input(next++);
  a.eps = ctx.attr(3 + n);
  return a;
}

void inferFormedByFusion(const InferContext& ctx, Outputs&) {
  ctx.fail(common::code::kInternal, "is formed by the controller's fusion of recorded ops and cannot be recorded itself");
}

}  // namespace dtorch::core
