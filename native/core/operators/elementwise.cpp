// Elementwise ops: unary ops from one table, and binary ops with PyTorch broadcasting and
// type promotion, in tensor-tensor and tensor-scalar forms.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

// ---- unary ------------------------------------------------------------------------------
// `floatResult`: integer inputs give the default float dtype, as torch.exp(int_tensor) does.
struct UnaryEntry {
  std::string_view name;
  bool floatResult;
  bool linear;  // f(a + b) = f(a) + f(b): Partial(sum/avg) passes through
  KernelFn kernel;
  KernelFn inplace;  // writes into input 0's buffer (see OpDef::inplace)
};

// The in-place kernels take a second handle on input 0's tensor and return it as the output.
at::Tensor reusedInput(const KernelContext& ctx) { return *ctx.inputs[0]; }

#define DTORCH_UNARY(fn)                                                                  \
  [](KernelContext& ctx) { ctx.outputs.push_back(at::fn(ctx.input(0))); },               \
  [](KernelContext& ctx) { ctx.outputs.push_back(reusedInput(ctx).fn##_()); }
const UnaryEntry kUnary[] = {
    {"neg", false, true, DTORCH_UNARY(neg)},          {"abs", false, false, DTORCH_UNARY(abs)},
    {"relu", false, false, DTORCH_UNARY(relu)},       {"exp", true, false, DTORCH_UNARY(exp)},
    {"log", true, false, DTORCH_UNARY(log)},          {"sqrt", true, false, DTORCH_UNARY(sqrt)},
    {"sigmoid", true, false, DTORCH_UNARY(sigmoid)},  {"tanh", true, false, DTORCH_UNARY(tanh)},
};
#undef DTORCH_UNARY

void inferUnarySameType(const InferContext& ctx, Outputs& out) {
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, ctx.inputs[0]->dtype));
}
void inferUnaryFloat(const InferContext& ctx, Outputs& out) {
  const DType in = ctx.inputs[0]->dtype;
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, c10::isIntegralType(in, /*includeBool=*/true) ? DType::Float : in));
}

// ---- placement rows -------------------------------------------------------------------------

// Every tensor dim may be sharded; the shard passes through.
void shardRows(const InferContext& ctx, SignatureRows& rows) {
  for (int32_t i = 0; i < ctx.inputs[0]->ndim(); ++i) rows.push_back(row({Placement::shard(i)}, Placement::shard(i)));
}
// Linear ops keep partial sums and averages partial.
void linearRows(const InferContext& ctx, SignatureRows& rows) {
  shardRows(ctx, rows);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) rows.push_back(row({Placement::partial(op)}, Placement::partial(op)));
}

// Broadcasting pairs: an output dim may be sharded when each input either has it at full size
// (sharded alike, or Replicate sliced locally) or broadcasts along it (then it stays Replicate).
void broadcastShardRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape &a = ctx.inputs[0]->shape, &b = ctx.inputs[1]->shape;
  const int64_t n = std::max<int64_t>(a.size(), b.size());
  for (int64_t o = 0; o < n; ++o) {
    const int64_t ai = o - (n - static_cast<int64_t>(a.size())), bi = o - (n - static_cast<int64_t>(b.size()));
    const int64_t size = std::max(ai >= 0 ? a[ai] : 1, bi >= 0 ? b[bi] : 1);
    const bool aFull = ai >= 0 && a[ai] == size, bFull = bi >= 0 && b[bi] == size;
    const Placement out = Placement::shard(static_cast<int32_t>(o));
    const Placement sa = Placement::shard(static_cast<int32_t>(ai)), sb = Placement::shard(static_cast<int32_t>(bi));
    if (aFull && bFull) {
      rows.push_back(row({sa, sb}, out));
      rows.push_back(row({sa, sb}, out, /*b may be R*/ 0b10));
      rows.push_back(row({sa, sb}, out, /*a may be R*/ 0b01));
    } else if (aFull) {
      rows.push_back(row({sa, Placement::replicate()}, out));
    } else if (bFull) {
      rows.push_back(row({Placement::replicate(), sb}, out));
    }
  }
}

// ---- binary -----------------------------------------------------------------------------
// Tensor-tensor form: inputs a, b; attribute alpha (add/sub only, else ignored).
// Tensor-scalar form (`*_scalar`): input a; attributes value, kind (0 int, 1 float, 2 bool), alpha.
enum class Binary { kAdd, kSub, kMul, kDiv };

// Partial rows follow linearity: P+P and P-P stay partial; P*R, R*P and P/R scale each part.
template <Binary kind>
void binaryRows(const InferContext& ctx, SignatureRows& rows) {
  broadcastShardRows(ctx, rows);
  const Placement r = Placement::replicate();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const Placement p = Placement::partial(op);
    if (kind == Binary::kAdd || kind == Binary::kSub) rows.push_back(row({p, p}, p));
    if (kind == Binary::kMul) {
      rows.push_back(row({p, r}, p));
      rows.push_back(row({r, p}, p));
    }
    if (kind == Binary::kDiv) rows.push_back(row({p, r}, p));
  }
}

// With a scalar: shards pass; scaling (mul, div) keeps partials partial, shifting does not.
template <Binary kind>
void binaryScalarRows(const InferContext& ctx, SignatureRows& rows) {
  if (kind == Binary::kMul || kind == Binary::kDiv) linearRows(ctx, rows);
  else shardRows(ctx, rows);
}

ScalarKind scalarKindOf(const InferContext& ctx, size_t index) {
  const int64_t kind = ctx.intAttr(index);
  if (kind < 0 || kind > 2) ctx.fail(common::code::kInvalidArgument, "unknown scalar kind " + std::to_string(kind));
  return static_cast<ScalarKind>(kind);
}

at::Scalar scalarOf(const KernelContext& ctx, size_t valueIndex) {
  const double value = ctx.attr(valueIndex);
  switch (static_cast<ScalarKind>(ctx.intAttr(valueIndex + 1))) {
    case ScalarKind::kInt: return at::Scalar(static_cast<int64_t>(value));
    case ScalarKind::kBool: return at::Scalar(value != 0);
    default: return at::Scalar(value);
  }
}

// alpha as PyTorch receives it from Python: an int when integral (integer tensors refuse a float alpha).
at::Scalar alphaScalar(double alpha) {
  return alpha == static_cast<double>(static_cast<int64_t>(alpha)) ? at::Scalar(static_cast<int64_t>(alpha)) : at::Scalar(alpha);
}

DType binaryResult(Binary kind, DType promoted) {
  // true division: integer operands give the default float dtype
  if (kind == Binary::kDiv && c10::isIntegralType(promoted, /*includeBool=*/true)) return DType::Float;
  return promoted;
}

template <Binary kind>
void inferBinary(const InferContext& ctx, Outputs& out) {
  const Shape shape = broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape);
  const DType dtype = binaryResult(kind, resultType(ctx.inputs, {}));
  if ((kind == Binary::kSub) && dtype == DType::Bool) {
    ctx.fail(common::code::kDtypeMismatch, "subtracting bool tensors is not supported; use logicalXor or cast with to('int32')");
  }
  out.push_back(outputLike(ctx, shape, dtype));
}

template <Binary kind>
void inferBinaryScalar(const InferContext& ctx, Outputs& out) {
  const ScalarKind scalar = scalarKindOf(ctx, 1);
  const DType dtype = binaryResult(kind, resultType(ctx.inputs, {scalar}));
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, dtype));
}

template <Binary kind>
void runBinary(KernelContext& ctx) {
  const at::Tensor &a = ctx.input(0), &b = ctx.input(1);
  switch (kind) {
    case Binary::kAdd: ctx.outputs.push_back(at::add(a, b, alphaScalar(ctx.attr(0)))); break;
    case Binary::kSub: ctx.outputs.push_back(at::sub(a, b, alphaScalar(ctx.attr(0)))); break;
    case Binary::kMul: ctx.outputs.push_back(at::mul(a, b)); break;
    case Binary::kDiv: ctx.outputs.push_back(at::div(a, b)); break;
  }
}

template <Binary kind>
void runBinaryInplace(KernelContext& ctx) {
  at::Tensor a = reusedInput(ctx);
  const at::Tensor& b = ctx.input(1);
  switch (kind) {
    case Binary::kAdd: a.add_(b, alphaScalar(ctx.attr(0))); break;
    case Binary::kSub: a.sub_(b, alphaScalar(ctx.attr(0))); break;
    case Binary::kMul: a.mul_(b); break;
    case Binary::kDiv: a.div_(b); break;
  }
  ctx.outputs.push_back(std::move(a));
}

// The scalar as a 0-d CPU tensor of the output dtype, marked as a wrapped number so that
// type promotion treats it as PyTorch treats a Python scalar. Running the out= variant with it
// costs about half of at::add(Tensor, Scalar) on small tensors (measured on LibTorch 2.13 CPU).
at::Tensor scalarOperand(const KernelContext& ctx) {
  at::Tensor s = at::scalar_tensor(scalarOf(ctx, 0), at::TensorOptions().dtype(ctx.outputMeta().dtype));
  s.unsafeGetTensorImpl()->set_wrapped_number(true);
  return s;
}

template <Binary kind>
void binaryScalarInto(KernelContext& ctx, at::Tensor out) {
  const at::Tensor& a = ctx.input(0);
  const at::Tensor s = scalarOperand(ctx);
  switch (kind) {
    case Binary::kAdd: at::add_out(out, a, s, alphaScalar(ctx.attr(2))); break;
    case Binary::kSub: at::sub_out(out, a, s, alphaScalar(ctx.attr(2))); break;
    case Binary::kMul: at::mul_out(out, a, s); break;
    case Binary::kDiv: at::div_out(out, a, s); break;
  }
  ctx.outputs.push_back(std::move(out));
}

template <Binary kind>
void runBinaryScalarInplace(KernelContext& ctx) {
  binaryScalarInto<kind>(ctx, reusedInput(ctx));
}

template <Binary kind>
void runBinaryScalar(KernelContext& ctx) {
  binaryScalarInto<kind>(ctx, at::empty(ctx.outputPiece().shape, ctx.input(0).options().dtype(ctx.outputMeta().dtype)));
}

}  // namespace

void registerElementwiseOps(OpRegistry& registry) {
  for (const UnaryEntry& u : kUnary) {
    registry.add({u.name, 1, "", u.floatResult ? inferUnaryFloat : inferUnarySameType, u.kernel,
                  u.linear ? linearRows : shardRows, u.inplace});
  }
#define DTORCH_BINARY(name, kind, attrs)                                                                  \
  registry.add({name, 2, attrs, inferBinary<kind>, runBinary<kind>, binaryRows<kind>, runBinaryInplace<kind>}); \
  registry.add({name "_scalar", 1, "value, kind, " attrs, inferBinaryScalar<kind>, runBinaryScalar<kind>,  \
                binaryScalarRows<kind>, runBinaryScalarInplace<kind>});
  DTORCH_BINARY("add", Binary::kAdd, "alpha")
  DTORCH_BINARY("sub", Binary::kSub, "alpha")
  DTORCH_BINARY("mul", Binary::kMul, "")
  DTORCH_BINARY("div", Binary::kDiv, "")
#undef DTORCH_BINARY
}

}  // namespace dtorch::core
