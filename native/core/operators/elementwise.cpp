// Elementwise ops, as tables: unary ops, binary ops with PyTorch broadcasting and type
// promotion (tensor-tensor and tensor-scalar forms), where and masked_fill.
// A JS number operand acts as a Python scalar: integral -> int, other -> float, boolean -> bool.
#include <ATen/ATen.h>

#include <array>
#include <cstring>

#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/addcmul_rows.h"
#include "external/cuda/layer_norm_addcmul.h"
#include "external/cuda/quick_gelu.h"
#include "external/cuda/scalar_op.h"

namespace dtorch::core {
namespace {

// The in-place kernels take a second handle on input 0's tensor and return it as the output.
at::Tensor reusedInput(const KernelContext& ctx) { return *ctx.inputs[0]; }

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
// Every input broadcasts against the output shape.
void broadcastInputRows(const InferContext& ctx, SignatureRows& rows, const Shape& out) {
  c10::SmallVector<const Shape*, 3> shapes;
  for (const TensorMeta* in : ctx.inputs) shapes.push_back(&in->shape);
  broadcastRows(shapes, out, 0, rows);
}

// ---- unary ----------------------------------------------------------------------------------

enum class UnaryResult {
  kSame,      // the input dtype
  kFloat,     // integer and bool inputs give the default float dtype (torch.exp(int) is float)
  kBool,      // isnan, isinf, logical_not
  kSameNoBool,  // the input dtype; bool inputs are refused (LibTorch has no bool kernel: neg, abs, ...)
  kLongForBool, // the input dtype, bool giving int64 (square is pow(x, 2))
};

struct UnaryEntry {
  std::string_view name;
  UnaryResult result;
  bool linear;  // f(a + b) = f(a) + f(b): Partial(sum/avg) passes through
  KernelFn kernel;
  KernelFn inplace;  // writes into input 0's buffer (see OpDef::inplace)
};

#define DTORCH_UNARY(fn)                                                    \
  [](KernelContext& ctx) { ctx.outputs.push_back(at::fn(ctx.input(0))); }, \
  [](KernelContext& ctx) { ctx.outputs.push_back(reusedInput(ctx).fn##_()); }
#define DTORCH_UNARY_NO_INPLACE(fn) [](KernelContext& ctx) { ctx.outputs.push_back(at::fn(ctx.input(0))); }, nullptr
const UnaryEntry kUnary[] = {
    {"neg", UnaryResult::kSameNoBool, true, DTORCH_UNARY(neg)},
    {"abs", UnaryResult::kSameNoBool, false, DTORCH_UNARY(abs)},
    {"relu", UnaryResult::kSameNoBool, false, DTORCH_UNARY(relu)},
    {"square", UnaryResult::kLongForBool, false, DTORCH_UNARY(square)},
    {"floor", UnaryResult::kSameNoBool, false, DTORCH_UNARY(floor)},
    {"round", UnaryResult::kSameNoBool, false, DTORCH_UNARY(round)},
    {"exp", UnaryResult::kFloat, false, DTORCH_UNARY(exp)},
    {"log", UnaryResult::kFloat, false, DTORCH_UNARY(log)},
    {"log2", UnaryResult::kFloat, false, DTORCH_UNARY(log2)},
    {"sqrt", UnaryResult::kFloat, false, DTORCH_UNARY(sqrt)},
    {"rsqrt", UnaryResult::kFloat, false, DTORCH_UNARY(rsqrt)},
    {"reciprocal", UnaryResult::kFloat, false, DTORCH_UNARY(reciprocal)},
    {"sin", UnaryResult::kFloat, false, DTORCH_UNARY(sin)},
    {"cos", UnaryResult::kFloat, false, DTORCH_UNARY(cos)},
    {"tanh", UnaryResult::kFloat, false, DTORCH_UNARY(tanh)},
    {"sigmoid", UnaryResult::kFloat, false, DTORCH_UNARY(sigmoid)},
    {"silu", UnaryResult::kSame, false, [](KernelContext& ctx) { ctx.outputs.push_back(at::silu(ctx.input(0))); },
     [](KernelContext& ctx) {
       at::Tensor t = reusedInput(ctx);
       ctx.outputs.push_back(at::silu_(t));
     }},
    // x * sigmoid(1.702 x): CLIP's activation (transformers' QuickGELUActivation), one node
    // instead of three, with the same operations in the same order; on GPUs one kernel
    // (external/cuda/quick_gelu) with the three kernels' bits
    {"quick_gelu", UnaryResult::kFloat, false,
     [](KernelContext& ctx) {
       const at::Tensor& x = ctx.input(0);
       std::optional<at::Tensor> fast = external::cuda::quickGelu(x);
       ctx.outputs.push_back(fast ? std::move(*fast) : at::sigmoid(at::mul(x, 1.702)).mul_(x));
     },
     [](KernelContext& ctx) {
       at::Tensor t = reusedInput(ctx);
       if (external::cuda::quickGeluInPlace(t)) {
         ctx.outputs.push_back(t);
         return;
       }
       const at::Tensor gate = at::sigmoid(at::mul(t, 1.702));
       ctx.outputs.push_back(t.mul_(gate));
     }},
    {"isnan", UnaryResult::kBool, false, DTORCH_UNARY_NO_INPLACE(isnan)},
    {"isinf", UnaryResult::kBool, false, DTORCH_UNARY_NO_INPLACE(isinf)},
    {"logical_not", UnaryResult::kBool, false, DTORCH_UNARY_NO_INPLACE(logical_not)},
};
#undef DTORCH_UNARY
#undef DTORCH_UNARY_NO_INPLACE

DType unaryDtype(UnaryResult result, DType in) {
  switch (result) {
    case UnaryResult::kFloat: return c10::isIntegralType(in, /*includeBool=*/true) ? DType::Float : in;
    case UnaryResult::kBool: return DType::Bool;
    case UnaryResult::kLongForBool: return in == DType::Bool ? DType::Long : in;
    default: return in;
  }
}

template <UnaryResult result>
void inferUnary(const InferContext& ctx, Outputs& out) {
  if (result == UnaryResult::kSameNoBool && ctx.inputs[0]->dtype == DType::Bool) {
    ctx.fail(common::code::kDtypeMismatch, "is not defined for bool tensors; use logicalNot for masks, or cast first with .to('int32')");
  }
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, unaryDtype(result, ctx.inputs[0]->dtype)));
}

void inferFloatOnly(const InferContext& ctx, Outputs& out) {
  const DType in = ctx.inputs[0]->dtype;
  if (!isFloating(in)) {
    ctx.fail(common::code::kDtypeMismatch, "needs a floating input, got " + std::string(dtypeName(in)) + "; cast first with .to('float32')");
  }
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, in));
}

// gelu: attribute approximate (0: none, 1: tanh).
std::string_view geluMode(const KernelContext& ctx) { return ctx.attr(0) != 0 ? "tanh" : "none"; }
void runGelu(KernelContext& ctx) { ctx.outputs.push_back(at::gelu(ctx.input(0), geluMode(ctx))); }
void runGeluInplace(KernelContext& ctx) {
  at::Tensor t = reusedInput(ctx);
  ctx.outputs.push_back(at::gelu_(t, geluMode(ctx)));
}

// clamp: attributes hasMin, min, hasMax, max; each bound a JS number (an int when integral). As
// torch.clamp, the bounds take part in type promotion (a fractional bound makes an integer
// tensor's result float32), and each must fit the result dtype.
std::optional<at::Scalar> bound(const KernelContext& ctx, size_t at) {
  if (ctx.attr(at) == 0) return std::nullopt;
  return numberScalar(ctx.attr(at + 1));
}
void inferClamp(const InferContext& ctx, Outputs& out) {
  if (ctx.attr(0) == 0 && ctx.attr(2) == 0) ctx.fail(common::code::kInvalidArgument, "give at least one of min and max");
  if (ctx.inputs[0]->dtype == DType::Bool) ctx.fail(common::code::kDtypeMismatch, "cannot clamp bool tensors");
  c10::SmallVector<ScalarKind, 2> kinds;
  for (size_t at : {0, 2}) {
    if (ctx.attr(at) != 0) kinds.push_back(kindOfNumber(ctx.attr(at + 1)));
  }
  const DType dtype = resultType(ctx.inputs, kinds);
  for (size_t at : {0, 2}) {
    const double v = ctx.attr(at + 1);
    if (ctx.attr(at) != 0 && !scalarFits(v, kindOfNumber(v), dtype)) {
      ctx.fail(common::code::kInvalidArgument, std::string(at == 0 ? "min " : "max ") + std::to_string(v) + " does not fit " + std::string(dtypeName(dtype)));
    }
  }
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, dtype));
}
void runClamp(KernelContext& ctx) { ctx.outputs.push_back(at::clamp(ctx.input(0), bound(ctx, 0), bound(ctx, 2))); }
void runClampInplace(KernelContext& ctx) {
  at::Tensor t = reusedInput(ctx);
  ctx.outputs.push_back(at::clamp_(t, bound(ctx, 0), bound(ctx, 2)));
}

// ---- binary ---------------------------------------------------------------------------------
// Tensor-tensor form: inputs a, b; attribute alpha (add/sub only, else ignored).
// Tensor-scalar form (`*_scalar`): input a; attributes value, kind (0 int, 1 float, 2 bool), alpha.

enum class BinaryResult { kPromote, kTrueDivide, kBool, kLogical };
enum class PartialRule { kNone, kAdditive, kScales, kNumerator };

using BinaryOut = at::Tensor& (*)(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);

struct BinaryEntry {
  std::string_view name;
  BinaryResult result;
  PartialRule partial;
  BinaryOut out;  // writes a (op) b into out; broadcasting, promotion and casting as PyTorch does
};

#define DTORCH_BINARY_OUT(call) [](at::Tensor& o, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) -> at::Tensor& { (void)alpha; return call; }
const BinaryEntry kBinary[] = {
    {"add", BinaryResult::kPromote, PartialRule::kAdditive, DTORCH_BINARY_OUT(at::add_out(o, a, b, alpha))},
    {"sub", BinaryResult::kPromote, PartialRule::kAdditive, DTORCH_BINARY_OUT(at::sub_out(o, a, b, alpha))},
    {"mul", BinaryResult::kPromote, PartialRule::kScales, DTORCH_BINARY_OUT(at::mul_out(o, a, b))},
    {"div", BinaryResult::kTrueDivide, PartialRule::kNumerator, DTORCH_BINARY_OUT(at::div_out(o, a, b))},
    {"pow", BinaryResult::kPromote, PartialRule::kNone, DTORCH_BINARY_OUT(at::pow_out(o, a, b))},
    {"minimum", BinaryResult::kPromote, PartialRule::kNone, DTORCH_BINARY_OUT(at::minimum_out(o, a, b))},
    {"maximum", BinaryResult::kPromote, PartialRule::kNone, DTORCH_BINARY_OUT(at::maximum_out(o, a, b))},
    {"eq", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::eq_out(o, a, b))},
    {"ne", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::ne_out(o, a, b))},
    {"lt", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::lt_out(o, a, b))},
    {"le", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::le_out(o, a, b))},
    {"gt", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::gt_out(o, a, b))},
    {"ge", BinaryResult::kBool, PartialRule::kNone, DTORCH_BINARY_OUT(at::ge_out(o, a, b))},
    {"logical_and", BinaryResult::kLogical, PartialRule::kNone, DTORCH_BINARY_OUT(at::logical_and_out(o, a, b))},
    {"logical_or", BinaryResult::kLogical, PartialRule::kNone, DTORCH_BINARY_OUT(at::logical_or_out(o, a, b))},
};
#undef DTORCH_BINARY_OUT

// The table entry behind an op ("add" and "add_scalar" share the "add" entry).
const BinaryEntry& binaryEntry(const OpDef& op) { return *static_cast<const BinaryEntry*>(op.family); }

// The kind at attrs[index], its value at attrs[index - 1]: an int kind must be an int64 value.
ScalarKind scalarKindOf(const InferContext& ctx, size_t index) {
  const int64_t kind = ctx.intAttr(index);
  if (kind < 0 || kind > 2) ctx.fail(common::code::kInvalidArgument, "unknown scalar kind " + std::to_string(kind));
  if (static_cast<ScalarKind>(kind) == ScalarKind::kInt && kindOfNumber(ctx.attr(index - 1)) != ScalarKind::kInt) {
    ctx.fail(common::code::kInvalidArgument, "int scalar " + std::to_string(ctx.attr(index - 1)) + " is not an int64");
  }
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
at::Scalar alphaScalar(double alpha) { return numberScalar(alpha); }

// As LibTorch checks when the kernel runs, at the call: an integer (or bool) add/sub takes an
// integer alpha; pow of bools has no kernel.
void checkOperands(const InferContext& ctx, const BinaryEntry& e, DType promoted, double alpha, bool boolScalar = false) {
  if (e.name == "sub") {
    bool anyBool = boolScalar;
    for (const TensorMeta* t : ctx.inputs) anyBool = anyBool || t->dtype == DType::Bool;
    if (anyBool) ctx.fail(common::code::kDtypeMismatch, "subtracting with a bool operand is not supported; use logicalXor, or cast with to('int32')");
  }
  if ((e.name == "add" || e.name == "sub") && c10::isIntegralType(promoted, /*includeBool=*/true) && kindOfNumber(alpha) != ScalarKind::kInt) {
    ctx.fail(common::code::kDtypeMismatch, "alpha " + std::to_string(alpha) + " is not an integer (inside int64), as a " +
                                               std::string(dtypeName(promoted)) + " result needs");
  }
  if ((e.name == "add" || e.name == "sub") && !scalarFits(alpha, kindOfNumber(alpha), promoted)) {
    ctx.fail(common::code::kInvalidArgument, "alpha " + std::to_string(alpha) + " does not fit " + std::string(dtypeName(promoted)));
  }
  if (e.name == "pow" && promoted == DType::Bool) ctx.fail(common::code::kDtypeMismatch, "pow is not defined for bool tensors; cast first with .to('int32')");
}

DType binaryDtype(const InferContext& ctx, const BinaryEntry& e, DType promoted) {
  switch (e.result) {
    case BinaryResult::kTrueDivide:
      return c10::isIntegralType(promoted, /*includeBool=*/true) ? DType::Float : promoted;
    case BinaryResult::kBool:
    case BinaryResult::kLogical: return DType::Bool;
    default:
      if (e.name == "sub" && promoted == DType::Bool) {
        ctx.fail(common::code::kDtypeMismatch, "subtracting bool tensors is not supported; use logicalXor or cast with to('int32')");
      }
      return promoted;
  }
}

void inferBinary(const InferContext& ctx, Outputs& out) {
  const BinaryEntry& e = binaryEntry(ctx.op);
  const Shape shape = broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape);
  const DType promoted = resultType(ctx.inputs, {});
  checkOperands(ctx, e, promoted, ctx.attr(0));
  out.push_back(outputLike(ctx, shape, binaryDtype(ctx, e, promoted)));
}

void inferBinaryScalar(const InferContext& ctx, Outputs& out) {
  const BinaryEntry& e = binaryEntry(ctx.op);
  const ScalarKind kind = scalarKindOf(ctx, 1);
  const DType promoted = resultType(ctx.inputs, {kind});
  checkOperands(ctx, e, promoted, ctx.attr(2), kind == ScalarKind::kBool);
  if (e.name == "pow" && c10::isIntegralType(promoted, /*includeBool=*/false) && kind == ScalarKind::kInt && ctx.attr(0) < 0) {
    ctx.fail(common::code::kInvalidArgument, "integers to negative integer powers are not allowed (as in PyTorch); use a float exponent");
  }
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, binaryDtype(ctx, e, promoted)));
}

// Partial rows follow linearity: P+P and P-P stay partial; P*R, R*P and P/R scale each part.
void binaryRows(const InferContext& ctx, SignatureRows& rows) {
  broadcastInputRows(ctx, rows, broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape));
  const Placement r = Placement::replicate();
  const PartialRule rule = binaryEntry(ctx.op).partial;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const Placement p = Placement::partial(op);
    if (rule == PartialRule::kAdditive) rows.push_back(row({p, p}, p));
    if (rule == PartialRule::kScales) {
      rows.push_back(row({p, r}, p));
      rows.push_back(row({r, p}, p));
    }
    if (rule == PartialRule::kNumerator) rows.push_back(row({p, r}, p));
  }
}

// With a scalar: shards pass; scaling (mul, div) keeps partials partial, shifting does not.
void binaryScalarRows(const InferContext& ctx, SignatureRows& rows) {
  const PartialRule rule = binaryEntry(ctx.op).partial;
  if (rule == PartialRule::kScales || rule == PartialRule::kNumerator) linearRows(ctx, rows);
  else shardRows(ctx, rows);
}

at::Tensor emptyOutput(const KernelContext& ctx) {
  return at::empty(ctx.outputPiece().shape, ctx.input(0).options().dtype(ctx.outputMeta().dtype));
}

void runBinaryInto(KernelContext& ctx, at::Tensor out) {
  binaryEntry(*ctx.node.op).out(out, ctx.input(0), ctx.input(1), alphaScalar(ctx.attr(0)));
  ctx.outputs.push_back(std::move(out));
}
void runBinary(KernelContext& ctx) { runBinaryInto(ctx, emptyOutput(ctx)); }
void runBinaryInplace(KernelContext& ctx) { runBinaryInto(ctx, reusedInput(ctx)); }

// The last few wrapped scalars this worker thread made, by (value, kind, dtype): a loop such as
// `x = x.add(1)` uses the same constant on every step, and making its 0-d CPU tensor costs about
// as much as the add itself on a small tensor (docs/engine.md, "Workers, streams and events").
// The kernels only read it (CUDA takes a CPU scalar by value at launch), so one tensor serves
// every call.
at::Tensor wrappedScalar(double number, ScalarKind kind, DType dtype, const at::Scalar& value) {
  struct Entry {
    uint64_t bits = 0;
    ScalarKind kind = ScalarKind::kInt;
    DType dtype = DType::Float;
    at::Tensor tensor;
  };
  constexpr size_t kEntries = 8;
  thread_local std::array<Entry, kEntries> entries;
  thread_local size_t next = 0;
  uint64_t bits;
  std::memcpy(&bits, &number, sizeof bits);
  for (const Entry& e : entries) {
    if (e.tensor.defined() && e.bits == bits && e.kind == kind && e.dtype == dtype) return e.tensor;
  }
  at::Tensor s = at::scalar_tensor(value, at::TensorOptions().dtype(dtype));
  s.unsafeGetTensorImpl()->set_wrapped_number(true);
  entries[next] = Entry{bits, kind, dtype, s};
  next = (next + 1) % kEntries;
  return s;
}

// The scalar as a 0-d CPU tensor marked as a wrapped number, so that type promotion treats it as
// PyTorch treats a Python scalar. PyTorch wraps a float as a double and an int as an int64; the
// kernel converts it to the type it computes in. Where that type is the op's dtype (float32,
// float64, an integer type the value fits), the scalar is made in it directly: a scalar of
// another dtype makes every CPU call convert it, twice the time of an add on a small tensor
// (LibTorch 2.13 CPU). For float16 and bfloat16 the kernels decide: GPUs (and CPU mul) compute
// float(x) * 0.1f, rounded once, while the CPU add rounds the scalar to the tensor's dtype
// first; so their scalar keeps PyTorch's dtype, and each kernel converts it as it does for
// PyTorch (a float16 0.1 made here changed a third of x * 0.1). A scalar the dtype cannot hold
// keeps its own dtype too, and the kernel converts it as PyTorch's does (an int wraps into a
// uint8 tensor, 1e300 becomes inf in a float32 one) instead of failing a checked conversion.
at::Tensor scalarOperand(const KernelContext& ctx, const BinaryEntry& e) {
  const at::Scalar value = scalarOf(ctx, 0);
  const bool boolResult = e.result == BinaryResult::kBool || e.result == BinaryResult::kLogical;
  DType dtype = boolResult ? at::result_type(ctx.input(0), value) : ctx.outputMeta().dtype;
  const auto kind = static_cast<ScalarKind>(ctx.intAttr(1));
  const bool reducedFloat = dtype == DType::Half || dtype == DType::BFloat16;
  if (reducedFloat || !scalarFits(ctx.attr(0), kind, dtype)) {
    dtype = kind == ScalarKind::kInt ? DType::Long : kind == ScalarKind::kBool ? DType::Bool : DType::Double;
  }
  return wrappedScalar(ctx.attr(0), kind, dtype, value);
}

// x + v, x - v (alpha 1: the subtraction is exact, as LibTorch's x + (-1) * v) and x * v on a
// small GPU tensor, through DTorch's kernel where it serves them.
bool scalarKernelServes(KernelContext& ctx, const BinaryEntry& e, at::Tensor& out) {
  if (!ctx.input(0).is_cuda() || static_cast<ScalarKind>(ctx.intAttr(1)) == ScalarKind::kBool) return false;
  const double value = ctx.attr(0), alpha = ctx.attr(2);
  if (e.name == "mul") return external::cuda::scalarOpInto(out, ctx.input(0), external::cuda::ScalarOpKind::kMul, value);
  if (alpha != 1) return false;
  if (e.name == "add") return external::cuda::scalarOpInto(out, ctx.input(0), external::cuda::ScalarOpKind::kAdd, value);
  if (e.name == "sub") return external::cuda::scalarOpInto(out, ctx.input(0), external::cuda::ScalarOpKind::kAdd, -value);
  return false;
}

void runBinaryScalarInto(KernelContext& ctx, at::Tensor out) {
  const BinaryEntry& e = binaryEntry(*ctx.node.op);
  if (!scalarKernelServes(ctx, e, out)) e.out(out, ctx.input(0), scalarOperand(ctx, e), alphaScalar(ctx.attr(2)));
  ctx.outputs.push_back(std::move(out));
}
void runBinaryScalar(KernelContext& ctx) { runBinaryScalarInto(ctx, emptyOutput(ctx)); }
void runBinaryScalarInplace(KernelContext& ctx) { runBinaryScalarInto(ctx, reusedInput(ctx)); }

// ---- where(cond, a, b) and masked_fill(x, mask; value, kind) ----------------------------------

void inferWhere(const InferContext& ctx, Outputs& out) {
  if (ctx.inputs[0]->dtype != DType::Bool) {
    ctx.fail(common::code::kDtypeMismatch, "condition must be bool, got " + std::string(dtypeName(ctx.inputs[0]->dtype)));
  }
  const Shape shape = broadcastShapes(ctx, broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape), ctx.inputs[2]->shape);
  out.push_back(outputLike(ctx, shape, resultType(ctx.inputs.slice(1), {})));
}
void whereRows(const InferContext& ctx, SignatureRows& rows) {
  broadcastInputRows(ctx, rows, broadcastShapes(ctx, broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape), ctx.inputs[2]->shape));
}
void runWhere(KernelContext& ctx) {
  ctx.outputs.push_back(at::where(ctx.input(0), ctx.input(1), ctx.input(2)).to(ctx.outputMeta().dtype));
}

// ---- addcmul(c, a, b): c + a * b, formed by fusing mul(a, b) into add -------------------------
// GPUs, one dtype: one pass and one rounding. Elsewhere mul, then add: bit-identical to the
// ops it replaces.
at::Tensor addcmulOf(const KernelContext& ctx, const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  const bool oneDtype = c.scalar_type() == a.scalar_type() && a.scalar_type() == b.scalar_type();
  if (c.is_cuda() && oneDtype && at::isFloatingType(c.scalar_type())) {
    // adaLN's operands broadcast one row per batch over the tokens: DTorch's row kernel
    std::optional<at::Tensor> rows = external::cuda::addcmulRows(c, a, b);
    return rows ? *rows : at::addcmul(c, a, b);
  }
  return addToProduct(ctx, at::mul(a, b), c);
}
void runAddcmul(KernelContext& ctx) { ctx.outputs.push_back(addcmulOf(ctx, ctx.input(0), ctx.input(1), ctx.input(2))); }

// ---- layer_norm_addcmul(c, x, b, weight?, bias?): c + layer_norm(x) * b, formed by fusing a
// layer norm into the addcmul that reads it (adaLN's modulation, norm(x) · (1 + scale) + shift);
// the layer norm's attributes (nNorm, shape..., hasWeight, hasBias, eps). GPUs, a
// parameter-free norm over the last dim: one pass (DTorch's row kernel). Elsewhere layer_norm,
// then addcmul as above: bit-identical to the ops it replaces on CPUs.
// bOffset 1: layer_norm_modulate's b + 1 (the add it replaces: at::add(b, 1), rounded to b's type).
void runLayerNormAddcmul(KernelContext& ctx) { ctx.outputs.push_back(modulatedLayerNorm(ctx, 0)); }

// ---- layer_norm_modulate(c, x, s, weight?, bias?): c + layer_norm(x) · (1 + s), formed by
// fusing add(s, 1) into the layer_norm_addcmul that reads it: adaLN's norm(x) · (1 + scale) +
// shift whole, in one pass on GPUs (1 + scale rounded as the add rounds it: the same bits).
void runLayerNormModulate(KernelContext& ctx) { ctx.outputs.push_back(modulatedLayerNorm(ctx, 1)); }

void inferMaskedFill(const InferContext& ctx, Outputs& out) {
  if (ctx.inputs[1]->dtype != DType::Bool) {
    ctx.fail(common::code::kDtypeMismatch, "mask must be bool, got " + std::string(dtypeName(ctx.inputs[1]->dtype)));
  }
  const Shape shape = broadcastShapes(ctx, ctx.inputs[0]->shape, ctx.inputs[1]->shape);
  if (shape != ctx.inputs[0]->shape) {
    ctx.fail(common::code::kShapeMismatch, "mask of shape " + formatShape(ctx.inputs[1]->shape) +
                                               " does not broadcast to the input's shape " + formatShape(ctx.inputs[0]->shape));
  }
  const ScalarKind kind = scalarKindOf(ctx, 1);
  if (!scalarFits(ctx.attr(0), kind, ctx.inputs[0]->dtype)) {
    ctx.fail(common::code::kInvalidArgument, "value " + std::to_string(ctx.attr(0)) + " does not fit " + std::string(dtypeName(ctx.inputs[0]->dtype)));
  }
  out.push_back(outputLike(ctx, shape, ctx.inputs[0]->dtype));
}
void maskedFillRows(const InferContext& ctx, SignatureRows& rows) { broadcastInputRows(ctx, rows, ctx.inputs[0]->shape); }
void runMaskedFill(KernelContext& ctx) { ctx.outputs.push_back(at::masked_fill(ctx.input(0), ctx.input(1), scalarOf(ctx, 0))); }

}  // namespace

at::Tensor modulatedLayerNorm(const KernelContext& ctx, double bOffset, const at::Tensor* into) {
  const at::Tensor &c = ctx.input(0), &x = ctx.input(1), &b = ctx.input(2);
  const NormArgs a = normArgs(ctx, 3);
  if (a.shape.size() == 1 && !a.weight && !a.bias) {
    if (std::optional<at::Tensor> fused = external::cuda::layerNormAddcmul(x, c, b, a.eps, bOffset, into)) return *fused;
  }
  const at::Tensor scale = bOffset == 0 ? b : at::add(b, bOffset);
  return addcmulOf(ctx, c, at::layer_norm(x, a.shape, a.weight, a.bias, a.eps), scale);
}

void registerElementwiseOps(OpRegistry& registry) {
  for (const UnaryEntry& u : kUnary) {
    InferFn infer = u.result == UnaryResult::kFloat        ? inferUnary<UnaryResult::kFloat>
                    : u.result == UnaryResult::kBool        ? inferUnary<UnaryResult::kBool>
                    : u.result == UnaryResult::kSameNoBool  ? inferUnary<UnaryResult::kSameNoBool>
                    : u.result == UnaryResult::kLongForBool ? inferUnary<UnaryResult::kLongForBool>
                                                            : inferUnary<UnaryResult::kSame>;
    if (u.name == "silu") infer = inferFloatOnly;
    registry.add({u.name, 1, "", infer, u.kernel, u.linear ? linearRows : shardRows, u.inplace});
  }
  registry.add({"gelu", 1, "approximate (0 none, 1 tanh)", inferFloatOnly, runGelu, shardRows, runGeluInplace});
  registry.add({"clamp", 1, "hasMin, min, hasMax, max", inferClamp, runClamp, shardRows, runClampInplace});
  for (const BinaryEntry& b : kBinary) {
    // in place only where the output can have input 0's dtype (the worker checks it too)
    const bool inplace = b.result == BinaryResult::kPromote || b.result == BinaryResult::kTrueDivide;
    OpDef tensors{b.name, 2, "alpha", inferBinary, runBinary, binaryRows, inplace ? runBinaryInplace : nullptr};
    tensors.family = &b;
    registry.add(tensors);
    OpDef scalar{registry.intern(std::string(b.name) + "_scalar"), 1, "value, kind, alpha", inferBinaryScalar,
                 runBinaryScalar, binaryScalarRows, inplace ? runBinaryScalarInplace : nullptr};
    scalar.family = &b;
    registry.add(scalar);
  }
  registry.add({"where", 3, "", inferWhere, runWhere, whereRows});
  registry.add({"addcmul", 3, "(formed by fusion)", inferFormedByFusion, runAddcmul});
  registry.add({"layer_norm_addcmul", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias, eps", inferFormedByFusion, runLayerNormAddcmul});
  registry.add({"layer_norm_modulate", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias, eps", inferFormedByFusion, runLayerNormModulate});
  registry.add({"masked_fill", 2, "value, kind", inferMaskedFill, runMaskedFill, maskedFillRows});
}

}  // namespace dtorch::core
