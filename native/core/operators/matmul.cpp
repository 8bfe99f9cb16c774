// matmul with torch.matmul's rules: 1-D operands gain and lose a dim, batch dims broadcast.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operators/contraction_rows.h"
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

// The rows of the einsum ...mk,...kn->...mn (contraction_rows.h): a 1-D A has no m, a 1-D B no
// n, and batch dims broadcast (a dim broadcast from 1 splits only the other operand). Not rows:
// S(m)·S(k) and S(k)·S(n) (each rank would hold a partial sum of only some rows).
void matmulRows(const InferContext& ctx, SignatureRows& rows) {
  const MatmulDims d = matmulDims(ctx);
  const size_t nb = d.batch.size();
  auto operand = [&](const Shape& batch, std::initializer_list<char> last) {
    ContractionOperand o;
    const size_t offset = nb - batch.size();  // batch dims align from the right
    for (size_t i = 0; i < batch.size(); ++i) {
      o.letters.push_back(static_cast<char>('A' + offset + i));
      o.whole.push_back(batch[i] == d.batch[offset + i]);
    }
    for (char l : last) o.letters.push_back(l), o.whole.push_back(true);
    return o;
  };
  std::vector<char> output;
  for (size_t o = 0; o < nb; ++o) output.push_back(static_cast<char>('A' + o));
  if (d.hasM) output.push_back('m');
  if (d.hasN) output.push_back('n');
  const ContractionOperand a = d.hasM ? operand(d.batchA, {'m', 'k'}) : operand(d.batchA, {'k'});
  const ContractionOperand b = d.hasN ? operand(d.batchB, {'k', 'n'}) : operand(d.batchB, {'k'});
  contractionRows({a, b}, output, rows);
}

void runMatmul(KernelContext& ctx) { ctx.outputs.push_back(at::matmul(ctx.input(0), ctx.input(1))); }

}  // namespace

void registerMatmulOps(OpRegistry& registry) {
  registry.add({"matmul", 2, "", inferMatmul, runMatmul, matmulRows});
}

}  // namespace dtorch::core
