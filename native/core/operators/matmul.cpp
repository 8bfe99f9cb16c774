// matmul with torch.matmul's rules: 1-D operands gain and lose a dim, batch dims broadcast.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

struct MatmulDims {
  Shape batchA, batchB, batch;  // batch dims of each operand and of the output (broadcast)
  bool hasM, hasN;              // a is at least 2-D / b is at least 2-D
};

MatmulDims matmulDims(const InferContext& ctx) {
  const TensorMeta &a = *ctx.inputs[0], &b = *ctx.inputs[1];
  MatmulDims d;
  d.batchA.assign(a.shape.begin(), a.shape.end() - std::min(a.ndim(), 2));
  d.batchB.assign(b.shape.begin(), b.shape.end() - std::min(b.ndim(), 2));
  d.batch = broadcastShapes(ctx, d.batchA, d.batchB);
  d.hasM = a.ndim() >= 2;
  d.hasN = b.ndim() >= 2;
  return d;
}

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
  checkMatmulDtype(ctx, a.dtype);
  const int64_t k1 = a.shape.back();
  const int64_t k2 = b.ndim() == 1 ? b.shape[0] : b.shape[b.ndim() - 2];
  if (k1 != k2) {
    ctx.fail(common::code::kShapeMismatch, "shapes " + formatShape(a.shape) + " and " + formatShape(b.shape) +
                                               " cannot be multiplied: contracted dims have sizes " + std::to_string(k1) +
                                               " and " + std::to_string(k2));
  }
  MatmulDims d = matmulDims(ctx);
  Shape shape = d.batch;
  if (d.hasM) shape.push_back(a.shape[a.ndim() - 2]);
  if (d.hasN) shape.push_back(b.shape.back());
  out.push_back(outputLike(ctx, std::move(shape), a.dtype));
}

// Rows derived for A[..., M, K] · B[..., K, N] (a 1-D A has no M, a 1-D B no N):
//   S(M)·R -> S(M); R·S(N) -> S(N); S(K)·S(K) -> P; S(K)·R and R·S(K) -> P with the Replicate
//   side sliced locally on K (the original's S(K)·R row is only right with that slice);
//   P·R -> P; R·P -> P; batch dims shard like broadcasting elementwise ops.
// Not rows: S(M)·S(K) and S(K)·S(N) (each rank would hold a partial sum of only some rows).
void matmulRows(const InferContext& ctx, SignatureRows& rows) {
  const TensorMeta &a = *ctx.inputs[0], &b = *ctx.inputs[1];
  const MatmulDims d = matmulDims(ctx);
  const Placement r = Placement::replicate();
  const int32_t nb = static_cast<int32_t>(d.batch.size());
  auto s = [](int64_t dim) { return Placement::shard(static_cast<int32_t>(dim)); };
  if (d.hasM) rows.push_back(row({s(a.ndim() - 2), r}, s(nb)));
  if (d.hasN) rows.push_back(row({r, s(b.ndim() - 1)}, s(nb + (d.hasM ? 1 : 0))));
  const Placement sum = Placement::partial(ReduceOp::kSum);
  const Placement aK = s(a.ndim() - 1), bK = s(b.ndim() == 1 ? 0 : b.ndim() - 2);
  rows.push_back(row({aK, bK}, sum));
  rows.push_back(row({aK, bK}, sum, 0b10));
  rows.push_back(row({aK, bK}, sum, 0b01));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    rows.push_back(row({Placement::partial(op), r}, Placement::partial(op)));
    rows.push_back(row({r, Placement::partial(op)}, Placement::partial(op)));
  }
  for (int32_t o = 0; o < nb; ++o) {
    const int64_t ai = o - (nb - static_cast<int64_t>(d.batchA.size()));
    const int64_t bi = o - (nb - static_cast<int64_t>(d.batchB.size()));
    const bool aFull = ai >= 0 && d.batchA[ai] == d.batch[o], bFull = bi >= 0 && d.batchB[bi] == d.batch[o];
    if (aFull && bFull) {
      rows.push_back(row({s(ai), s(bi)}, s(o)));
      rows.push_back(row({s(ai), s(bi)}, s(o), 0b10));
      rows.push_back(row({s(ai), s(bi)}, s(o), 0b01));
    } else if (aFull) {
      rows.push_back(row({s(ai), r}, s(o)));
    } else if (bFull) {
      rows.push_back(row({r, s(bi)}, s(o)));
    }
  }
}

void runMatmul(KernelContext& ctx) { ctx.outputs.push_back(at::matmul(ctx.input(0), ctx.input(1))); }

}  // namespace

void registerMatmulOps(OpRegistry& registry) {
  registry.add({"matmul", 2, "", inferMatmul, runMatmul, matmulRows});
}

}  // namespace dtorch::core
