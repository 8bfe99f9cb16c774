// matmul with torch.matmul's rules: 1-D operands gain and lose a dim, batch dims broadcast.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

void inferMatmul(const InferContext& ctx, Outputs& out) {
  const TensorMeta &a = *ctx.inputs[0], &b = *ctx.inputs[1];
  if (a.ndim() == 0 || b.ndim() == 0) {
    ctx.fail(common::code::kShapeMismatch, "both operands need at least 1 dim, got shapes " + formatShape(a.shape) +
                                               " and " + formatShape(b.shape) + "; use mul for scalars");
  }
  if (a.dtype != b.dtype) {
    ctx.fail(common::code::kDtypeMismatch, "operands must have one dtype, got " + std::string(dtypeName(a.dtype)) +
                                               " and " + std::string(dtypeName(b.dtype)) + "; cast one with .to(dtype)");
  }
  const int64_t k1 = a.shape.back();
  const int64_t k2 = b.ndim() == 1 ? b.shape[0] : b.shape[b.ndim() - 2];
  if (k1 != k2) {
    ctx.fail(common::code::kShapeMismatch, "shapes " + formatShape(a.shape) + " and " + formatShape(b.shape) +
                                               " cannot be multiplied: contracted dims have sizes " + std::to_string(k1) +
                                               " and " + std::to_string(k2));
  }
  Shape batchA(a.shape.begin(), a.shape.end() - std::min(a.ndim(), 2));
  Shape batchB(b.shape.begin(), b.shape.end() - std::min(b.ndim(), 2));
  Shape shape = broadcastShapes(ctx, batchA, batchB);
  if (a.ndim() >= 2) shape.push_back(a.shape[a.ndim() - 2]);
  if (b.ndim() >= 2) shape.push_back(b.shape.back());
  out.push_back(outputLike(ctx, std::move(shape), a.dtype));
}

void runMatmul(KernelContext& ctx) { ctx.outputs.push_back(at::matmul(ctx.input(0), ctx.input(1))); }

}  // namespace

void registerMatmulOps(OpRegistry& registry) {
  registry.add({"matmul", 2, "", inferMatmul, runMatmul});
}

}  // namespace dtorch::core
