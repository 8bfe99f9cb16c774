// Neural-network ops: linear, layer_norm, rms_norm, group_norm, embedding, rotary_emb and
// scaled_dot_product_attention (sdpa, and sdpa_heads over heads packed in the last dim).
// Optional tensor inputs (weight, bias, mask) are announced by flags in the attributes, so the
// kernel knows which input is which.
#include <ATen/ATen.h>

#include <optional>

#include "common/env.h"
#include "common/error.h"
#include "core/operand/mesh_table.h"
#include "core/operators/contraction_rows.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/group_norm.h"
#include "external/cuda/layer_norm_addcmul.h"
#include "external/cuda/rms_norm.h"
#include "external/cuda/rotary_emb.h"
#include "external/cuda/tuned_matmul.h"

namespace dtorch::core {
namespace {

using common::code::kDtypeMismatch;
using common::code::kInvalidArgument;
using common::code::kShapeMismatch;

void checkSameDtype(const InferContext& ctx) {
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    if (ctx.inputs[k]->dtype != ctx.inputs[0]->dtype) {
      ctx.fail(kDtypeMismatch, "input #" + std::to_string(k) + " is " + std::string(dtypeName(ctx.inputs[k]->dtype)) +
                                   " but input #0 is " + std::string(dtypeName(ctx.inputs[0]->dtype)) + "; cast with .to(dtype)");
    }
  }
}

const Placement R = Placement::replicate();
const Placement P = Placement::partial(ReduceOp::kSum);
Placement S(int64_t d) { return Placement::shard(static_cast<int32_t>(d)); }

// ---- linear(x, weight, bias?): y = x W^T + b ----------------------------------------------

void inferLinear(const InferContext& ctx, Outputs& out) {
  if (ctx.inputs.size() < 2 || ctx.inputs.size() > 3) ctx.fail(kInvalidArgument, "takes x, weight and an optional bias");
  const TensorMeta &x = *ctx.inputs[0], &w = *ctx.inputs[1];
  if (w.ndim() != 2 || x.ndim() < 1 || x.shape.back() != w.shape[1]) {
    ctx.fail(kShapeMismatch, "x of shape " + formatShape(x.shape) + " and weight of shape " + formatShape(w.shape) +
                                 " do not fit: weight must be [out, in] with in = x's last dim");
  }
  if (ctx.inputs.size() == 3 && (ctx.inputs[2]->ndim() != 1 || ctx.inputs[2]->shape[0] != w.shape[0])) {
    ctx.fail(kShapeMismatch, "bias of shape " + formatShape(ctx.inputs[2]->shape) + " must be [" + std::to_string(w.shape[0]) + "]");
  }
  checkSameDtype(ctx);
  checkMatmulDtype(ctx, x.dtype);
  Shape shape = x.shape;
  shape.back() = w.shape[0];
  out.push_back(outputLike(ctx, std::move(shape), x.dtype));
}
// DESIGN §10, as the einsum ...k,nk->...n with the bias [n] added (contraction_rows.h): leading
// dims of x shard through; column parallel (W and b sharded on out) shards the last dim; row
// parallel (x on in, W on in) gives partial sums, and then the bias must be partial too (added
// once); a partial x or W beside a replicated other stays partial, with a partial bias.
void linearRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t last = ctx.inputs[0]->ndim() - 1;
  ContractionOperand x, w{{'n', 'k'}, {true, true}};
  for (int64_t i = 0; i < last; ++i) x.letters.push_back(static_cast<char>('A' + i)), x.whole.push_back(true);
  x.letters.push_back('k'), x.whole.push_back(true);
  std::vector<char> output(x.letters.begin(), x.letters.end() - 1);
  output.push_back('n');
  std::vector<ContractionOperand> operands{x, w};
  if (ctx.inputs.size() == 3) operands.push_back({{'n'}, {true}, /*added=*/true});
  contractionRows(operands, output, rows);
}
// GPUs: x [B, N, K] whose batches are whole [N, K] matrices spaced further apart than N·K (the
// image or text part of a joint attention's output, split by tokens, with B > 1). at::linear
// would copy all of x to make it one [B·N, K] matrix; one matmul per batch reads the parts where
// they are, each into its rows of the output (the bias in cuBLASLt's epilogue, as at::linear).
constexpr int64_t kMaxMatmulsPerBatch = 8;  // beyond that, the launches cost more than the copy
std::optional<at::Tensor> linearPerBatch(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias) {
  if (!x.is_cuda() || x.dim() != 3 || x.size(0) < 2 || x.size(0) > kMaxMatmulsPerBatch || x.size(1) < 2 || x.is_contiguous()) return std::nullopt;
  if (x.stride(2) != 1 || x.stride(1) != x.size(2)) return std::nullopt;  // a batch is not one row-major matrix: LibTorch's copy
  at::Tensor y = at::empty({x.size(0), x.size(1), w.size(0)}, x.options());
  const at::Tensor wt = w.t();
  for (int64_t i = 0; i < x.size(0); ++i) {
    at::Tensor rows = y.select(0, i);
    if (bias) at::addmm_out(rows, *bias, x.select(0, i), wt);
    else at::mm_out(rows, x.select(0, i), wt);
  }
  return y;
}
// x [..., K] as a [rows, K] matrix without a copy: x contiguous, or its rows evenly spaced, each
// contiguous, further apart than K (the first columns of a wider buffer: a LoRA join a Flux single
// block's q/k/v matmul shares with proj_mlp); nullopt otherwise.
std::optional<at::Tensor> rowsOf(const at::Tensor& x) {
  if (x.dim() < 2 || x.numel() == 0 || x.stride(-1) != 1) return std::nullopt;
  if (x.is_contiguous()) return x.view({-1, x.size(-1)});
  if (x.stride(-2) < x.size(-1)) return std::nullopt;
  for (int64_t d = x.dim() - 3; d >= 0; --d) {
    if (x.size(d) > 1 && x.stride(d) != x.stride(d + 1) * x.size(d + 1)) return std::nullopt;  // rows not evenly spaced
  }
  return x.as_strided({x.numel() / x.size(-1), x.size(-1)}, {x.stride(-2), 1});
}
std::vector<int64_t> linearShape(const at::Tensor& x, const at::Tensor& w) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  return shape;
}
// x's rows further apart than K, with a bias: at::linear fuses the bias only for a contiguous x
// (else it multiplies, then adds the bias in a pass over the output of its own); one addmm reads
// the rows where they lie (BLAS's leading dimension), the bias in its epilogue: the bits of a
// contiguous x.
std::optional<at::Tensor> linearStridedRows(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias) {
  if (!bias || x.is_contiguous()) return std::nullopt;
  const std::optional<at::Tensor> rows = rowsOf(x);
  return rows ? std::optional<at::Tensor>(at::addmm(*bias, *rows, w.t()).view(linearShape(x, w))) : std::nullopt;
}
// GPUs, 16-bit floats: the cuBLASLt kernel timed fastest for the shape (tuned_matmul.h), on x's
// rows where they lie, the bias (and a GELU) in its epilogue. The setting is read first: with it
// off (the default), no rows view is made on this hot path.
std::optional<at::Tensor> linearTuned(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, external::cuda::MatmulEpilogue epilogue) {
  if (!x.is_cuda() || !common::settings().matmulTuning) return std::nullopt;
  const std::optional<at::Tensor> rows = rowsOf(x);
  std::optional<at::Tensor> y = rows ? external::cuda::tunedLinear(*rows, w, bias, epilogue) : std::nullopt;
  return y ? std::optional<at::Tensor>(y->view(linearShape(x, w))) : std::nullopt;
}
void runLinear(KernelContext& ctx) {
  const std::optional<at::Tensor> bias = ctx.inputs.size() == 3 ? std::optional<at::Tensor>(ctx.input(2)) : std::nullopt;
  if (std::optional<at::Tensor> y = linearPerBatch(ctx.input(0), ctx.input(1), bias)) {
    ctx.outputs.push_back(*y);
    return;
  }
  using external::cuda::MatmulEpilogue;
  if (std::optional<at::Tensor> y = linearTuned(ctx.input(0), ctx.input(1), bias ? &*bias : nullptr, bias ? MatmulEpilogue::kBias : MatmulEpilogue::kNone)) {
    ctx.outputs.push_back(*y);
    return;
  }
  if (std::optional<at::Tensor> y = linearStridedRows(ctx.input(0), ctx.input(1), bias)) {
    ctx.outputs.push_back(*y);
    return;
  }
  ctx.outputs.push_back(at::linear(ctx.input(0), ctx.input(1), bias));
}

// ---- linear_gelu(x, weight, bias): gelu(linear(x, W, b), tanh), formed by fusion ------------
// GPUs, 16-bit floats: one cuBLASLt matmul whose epilogue adds the bias and applies GELU (tanh),
// so the [tokens, out] product goes through memory once; elsewhere linear, then gelu in place
// (bit-identical to the unfused ops).
void runLinearGelu(KernelContext& ctx) {
  const at::Tensor &x = ctx.input(0), &w = ctx.input(1), &b = ctx.input(2);
  if (x.is_cuda() && x.dim() >= 2 && x.numel() > 0 && w.size(0) > 1 && at::isReducedFloatingType(x.scalar_type())) {
    if (std::optional<at::Tensor> y = linearTuned(x, w, &b, external::cuda::MatmulEpilogue::kGeluBias)) {
      ctx.outputs.push_back(*y);
      return;
    }
    const at::Tensor y = at::_addmm_activation(b, x.reshape({-1, x.size(-1)}), w.t(), 1, 1, /*use_gelu=*/true);
    ctx.outputs.push_back(y.view(linearShape(x, w)));
    return;
  }
  at::Tensor y = at::linear(x, w, b);
  at::gelu_(y, "tanh");
  ctx.outputs.push_back(y);
}

// ---- linear_add(c, x, weight): c + linear(x, W), formed by fusing a bias-free linear into an add -
// GPUs, 16-bit floats, c of the output's shape: one matmul that accumulates into c (cuBLAS with
// beta = 1; in place when c dies here, so the product never goes through memory on its own);
// elsewhere linear, then add (bit-identical to the unfused ops). c may be rows of a wider buffer
// (an unfused LoRA's tall product [y | A x], y's rows further apart than its width: rowsOf), which
// cuBLAS reads where they lie (such a c is a view: never written in place).
std::optional<at::Tensor> accumulatorRows(const at::Tensor& c, const at::Tensor& x, const at::Tensor& w) {
  const bool fits = x.is_cuda() && x.dim() >= 2 && x.numel() > 0 && at::isReducedFloatingType(x.scalar_type()) && c.scalar_type() == x.scalar_type() &&
                    w.scalar_type() == x.scalar_type() && c.dim() == x.dim() && c.size(-1) == w.size(0) &&
                    std::equal(c.sizes().begin(), c.sizes().end() - 1, x.sizes().begin());
  return fits ? rowsOf(c) : std::nullopt;
}
void runLinearAdd(KernelContext& ctx) {
  const at::Tensor &c = ctx.input(0), &x = ctx.input(1), &w = ctx.input(2);
  if (const std::optional<at::Tensor> rows = accumulatorRows(c, x, w)) {
    // rows of a wider buffer: cuBLASLt reads them where they lie (D apart from C), where
    // at::addmm would copy them into its output first
    const at::Tensor x2 = x.reshape({-1, x.size(-1)});
    std::optional<at::Tensor> y = c.is_contiguous() ? std::nullopt : external::cuda::linearOnto(*rows, x2, w);
    ctx.outputs.push_back((y ? *y : at::addmm(*rows, x2, w.t())).view(c.sizes()));
    return;
  }
  ctx.outputs.push_back(addToProduct(ctx, at::linear(x, w), c));
}
void runLinearAddInplace(KernelContext& ctx) {
  at::Tensor c = *ctx.inputs[0];
  const at::Tensor &x = ctx.input(1), &w = ctx.input(2);
  if (const std::optional<at::Tensor> rows = accumulatorRows(c, x, w)) rows->addmm_(x.reshape({-1, x.size(-1)}), w.t());
  else c.add_(at::linear(x, w));
  ctx.outputs.push_back(c);
}

// ---- layer_norm / rms_norm: attrs nNorm, normalizedShape..., hasWeight, hasBias, eps ----------

Shape normShape(const InferContext& ctx) {
  Shape s;
  for (int64_t i = 0; i < ctx.intAttr(0); ++i) s.push_back(ctx.intAttr(1 + i));
  return s;
}
void inferNorm(const InferContext& ctx, Outputs& out) {
  const TensorMeta& x = *ctx.inputs[0];
  const Shape norm = normShape(ctx);
  const int64_t n = static_cast<int64_t>(norm.size());
  bool fits = n >= 1 && n <= x.ndim();
  for (int64_t i = 0; fits && i < n; ++i) fits = x.shape[x.ndim() - n + i] == norm[i];
  if (!fits) {
    ctx.fail(kShapeMismatch, "normalized shape " + formatShape(norm) + " must be the last dims of the input's shape " + formatShape(x.shape));
  }
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    if (ctx.inputs[k]->shape != norm) {
      ctx.fail(kShapeMismatch, "weight/bias of shape " + formatShape(ctx.inputs[k]->shape) + " must have the normalized shape " + formatShape(norm));
    }
  }
  if (!isFloating(x.dtype)) ctx.fail(kDtypeMismatch, "needs a floating input, got " + std::string(dtypeName(x.dtype)));
  out.push_back(outputLike(ctx, x.shape, x.dtype));
}
// Any leading (not normalized) dim shards through; weight and bias stay whole.
void normRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t lead = ctx.inputs[0]->ndim() - ctx.intAttr(0);
  for (int64_t i = 0; i < lead; ++i) {
    c10::SmallVector<Placement, 3> in{S(i)};
    in.append(ctx.inputs.size() - 1, R);
    rows.push_back(row(in, S(i)));
  }
}
void runLayerNorm(KernelContext& ctx) {
  const NormArgs a = normArgs(ctx, 1);
  // on GPUs, an affine norm over the last dim goes through DTorch's row kernel
  std::optional<at::Tensor> fast;
  if (a.shape.size() == 1 && a.weight && a.bias) fast = external::cuda::layerNormAffine(ctx.input(0), *a.weight, *a.bias, a.eps);
  ctx.outputs.push_back(fast ? std::move(*fast) : at::layer_norm(ctx.input(0), a.shape, a.weight, a.bias, a.eps));
}
// rms_norm's value: on GPUs, short last-dim rows (per-head norms) go through DTorch's row kernel.
at::Tensor rmsNorm(const at::Tensor& x, const NormArgs& a) {
  std::optional<at::Tensor> fast = a.shape.size() == 1 ? external::cuda::rmsNormLastDim(x, a.weight, a.eps) : std::nullopt;
  return fast ? *fast : at::rms_norm(x, a.shape, a.weight, a.eps);
}
void runRmsNorm(KernelContext& ctx) { ctx.outputs.push_back(rmsNorm(ctx.input(0), normArgs(ctx, 1))); }

// ---- group_norm(x[N, C, *], weight?, bias?): attrs groups, hasWeight, hasBias, eps ---------------

void inferGroupNorm(const InferContext& ctx, Outputs& out) {
  const TensorMeta& x = *ctx.inputs[0];
  const int64_t groups = ctx.intAttr(0);
  if (x.ndim() < 2) ctx.fail(kShapeMismatch, "needs an input [N, C, ...], got " + formatShape(x.shape));
  if (groups <= 0 || x.shape[1] % groups != 0) {
    ctx.fail(kInvalidArgument, std::to_string(x.shape[1]) + " channels do not split into " + std::to_string(groups) + " groups");
  }
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    if (ctx.inputs[k]->ndim() != 1 || ctx.inputs[k]->shape[0] != x.shape[1]) {
      ctx.fail(kShapeMismatch, "weight/bias must be [" + std::to_string(x.shape[1]) + "], got " + formatShape(ctx.inputs[k]->shape));
    }
  }
  if (!isFloating(x.dtype)) ctx.fail(kDtypeMismatch, "needs a floating input, got " + std::string(dtypeName(x.dtype)));
  out.push_back(outputLike(ctx, x.shape, x.dtype));
}
void groupNormRows(const InferContext& ctx, SignatureRows& rows) {
  c10::SmallVector<Placement, 3> in{S(0)};
  in.append(ctx.inputs.size() - 1, R);
  rows.push_back(row(in, S(0)));
}
// group_norm's weight and bias, where its attributes say it has them.
std::pair<std::optional<at::Tensor>, std::optional<at::Tensor>> groupNormAffine(const KernelContext& ctx) {
  size_t next = 1;
  std::optional<at::Tensor> weight, bias;
  if (ctx.attr(1) != 0) weight = ctx.input(next++);
  if (ctx.attr(2) != 0) bias = ctx.input(next++);
  return {weight, bias};
}
at::Tensor groupNorm(const KernelContext& ctx) {
  const auto [weight, bias] = groupNormAffine(ctx);
  std::optional<at::Tensor> fast = external::cuda::groupNormLongRows(ctx.input(0), ctx.intAttr(0), weight, bias, ctx.attr(3));
  return fast ? std::move(*fast) : at::group_norm(ctx.input(0), ctx.intAttr(0), weight, bias, ctx.attr(3));
}
void runGroupNorm(KernelContext& ctx) { ctx.outputs.push_back(groupNorm(ctx)); }

// group_norm_silu(x, weight?, bias?) (formed by fusion of group_norm into the silu reading its
// output: a VAE resnet block's norm and activation; the norm's attributes): on GPUs DTorch's
// group norm kernel applies the SiLU as it writes (external/cuda/group_norm); elsewhere the two
// ops in turn.
void runGroupNormSilu(KernelContext& ctx) {
  const auto [weight, bias] = groupNormAffine(ctx);
  std::optional<at::Tensor> fused = external::cuda::groupNormSilu(ctx.input(0), ctx.intAttr(0), weight, bias, ctx.attr(3));
  ctx.outputs.push_back(fused ? std::move(*fused) : at::silu(groupNorm(ctx)));
}

// ---- embedding(ids, weight[V, D]) ------------------------------------------------------------

void inferEmbedding(const InferContext& ctx, Outputs& out) {
  const TensorMeta &ids = *ctx.inputs[0], &w = *ctx.inputs[1];
  if (ids.dtype != DType::Long && ids.dtype != DType::Int) {
    ctx.fail(kDtypeMismatch, "ids must be int64 or int32, got " + std::string(dtypeName(ids.dtype)));
  }
  if (w.ndim() != 2) ctx.fail(kShapeMismatch, "weight must be [num_embeddings, dim], got " + formatShape(w.shape));
  Shape shape = ids.shape;
  shape.push_back(w.shape[1]);
  out.push_back(outputLike(ctx, std::move(shape), w.dtype));
}
// (R, S(1)) -> S(last): each rank holds some embedding columns; (S(i), R) -> S(i); (R, S(0)) -> P:
// each rank looks up the ids in its rows and writes zeros for the others (summed on read).
void embeddingRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t ndim = ctx.inputs[0]->ndim();
  rows.push_back(row({R, S(1)}, S(ndim)));
  for (int64_t i = 0; i < ndim; ++i) rows.push_back(row({S(i), R}, S(i)));
  rows.push_back(row({R, S(0)}, P));
}
void runEmbedding(KernelContext& ctx) {
  const at::Tensor &ids = ctx.input(0), &w = ctx.input(1);
  const LocalPiece rowsHere = ctx.inputPiece(1);
  const int64_t vocab = ctx.node.inputMetas[1].shape[0];
  if (rowsHere.shape[0] == vocab) {  // the whole table is here
    ctx.outputs.push_back(at::embedding(w, ids));
    return;
  }
  const int64_t lo = rowsHere.offset[0], n = rowsHere.shape[0];
  const at::Tensor mine = (ids >= lo).logical_and_(ids < lo + n);
  if (n == 0) {
    std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
    shape.push_back(w.size(1));
    ctx.outputs.push_back(at::zeros(shape, w.options()));
    return;
  }
  at::Tensor out = at::embedding(w, (ids - lo).clamp_(0, n - 1));
  ctx.outputs.push_back(out.mul_(mine.unsqueeze(-1).to(out.scalar_type())));
}

// ---- scaled_dot_product_attention(q, k, v, mask?): attrs hasMask, isCausal, hasScale, scale ----
// sdpa_heads takes the heads packed side by side in the last dim, as the projections make them:
// q [..., L, H*E], k [..., S, H*E], v [..., S, H*Ev] and out [..., L, H*Ev] (attrs heads first),
// the same as viewing them as [..., H, L, E] around sdpa (the kernel takes those views), without
// recording the six view ops.

// Attention attributes at `first` (after sdpa_heads' heads), and the head count (0: unpacked).
struct AttentionAttrs {
  int64_t heads;
  size_t first;
  template <typename Ctx>
  AttentionAttrs(const Ctx& ctx, bool packed) : heads(packed ? ctx.intAttr(0) : 0), first(packed ? 1 : 0) {}
  template <typename Ctx>
  bool hasMask(const Ctx& ctx) const { return ctx.attr(first) != 0; }
  template <typename Ctx>
  bool causal(const Ctx& ctx) const { return ctx.attr(first + 1) != 0; }
  template <typename Ctx>
  std::optional<double> scale(const Ctx& ctx) const { return ctx.attr(first + 2) != 0 ? std::optional<double>(ctx.attr(first + 3)) : std::nullopt; }
};

template <bool Packed>
void inferAttention(const InferContext& ctx, Outputs& out) {
  const AttentionAttrs a(ctx, Packed);
  if (Packed && a.heads < 1) ctx.fail(kInvalidArgument, "heads must be a positive integer, got " + std::to_string(a.heads));
  if (a.hasMask(ctx) && a.causal(ctx)) ctx.fail(kInvalidArgument, "give either attnMask or isCausal, not both");
  if (ctx.inputs.size() != (a.hasMask(ctx) ? 4u : 3u)) ctx.fail(kInvalidArgument, "takes q, k, v and the mask announced by hasMask");
  const TensorMeta &q = *ctx.inputs[0], &k = *ctx.inputs[1], &v = *ctx.inputs[2];
  const std::string form = Packed ? "[..., L, heads*E], [..., S, heads*E], [..., S, heads*Ev] with heads = " + std::to_string(a.heads)
                                  : "[..., L, E], [..., S, E], [..., S, Ev]";
  if (q.ndim() < 2 || k.ndim() != q.ndim() || v.ndim() != q.ndim() || q.shape.back() != k.shape.back() ||
      k.shape[k.ndim() - 2] != v.shape[v.ndim() - 2] ||
      (Packed && (q.shape.back() % a.heads != 0 || v.shape.back() % a.heads != 0))) {
    ctx.fail(kShapeMismatch, "q " + formatShape(q.shape) + ", k " + formatShape(k.shape) + " and v " + formatShape(v.shape) + " do not fit " + form);
  }
  if (a.hasMask(ctx) && ctx.inputs[3]->dtype != DType::Bool && ctx.inputs[3]->dtype != q.dtype) {
    ctx.fail(kDtypeMismatch, "attnMask must be bool or " + std::string(dtypeName(q.dtype)));
  }
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.inputs[i]->dtype != q.dtype) ctx.fail(kDtypeMismatch, "q, k and v must share one dtype");
  }
  if (!isFloating(q.dtype)) ctx.fail(kDtypeMismatch, "needs floating q, k and v, got " + std::string(dtypeName(q.dtype)));
  const Shape batch(q.shape.begin(), q.shape.end() - 2);
  for (const TensorMeta* t : {&k, &v}) {
    if (broadcastShapes(ctx, batch, Shape(t->shape.begin(), t->shape.end() - 2)) != batch) {
      ctx.fail(kShapeMismatch, "the batch dims of k " + formatShape(k.shape) + " and v " + formatShape(v.shape) + " must broadcast to q's " + formatShape(q.shape));
    }
  }
  if (a.hasMask(ctx)) {
    // the mask broadcasts to the attention weights [..., L, S] ([..., heads, L, S] when packed)
    Shape weights = batch;
    if (Packed) weights.push_back(a.heads);
    weights.push_back(q.shape[q.ndim() - 2]);
    weights.push_back(k.shape[k.ndim() - 2]);
    const Shape& mask = ctx.inputs[3]->shape;
    if (broadcastShapes(ctx, weights, mask) != weights) {
      ctx.fail(kShapeMismatch, "attnMask of shape " + formatShape(mask) + " does not broadcast to the attention weights " + formatShape(weights) +
                                   (Packed ? " ([..., heads, L, S])" : " ([..., L, S])"));
    }
  }
  Shape shape = q.shape;
  shape.back() = v.shape.back();
  out.push_back(outputLike(ctx, std::move(shape), q.dtype));
}
// Batch dims (all but the last two: the heads too, unpacked) shard when q, k and v (and a mask
// that has them) shard alike; the query sequence shards against whole k and v when not causal
// (the mask then shards on its query dim). Packed heads have no row: a split of the last dim
// need not fall between heads (the API unpacks such inputs).
template <bool Packed>
void attentionRows(const InferContext& ctx, SignatureRows& rows) {
  const AttentionAttrs a(ctx, Packed);
  const int64_t n = ctx.inputs[0]->ndim();
  const int64_t weightsDims = Packed ? n + 1 : n;  // [..., (heads,) L, S]
  const Shape* mask = a.hasMask(ctx) ? &ctx.inputs[3]->shape : nullptr;
  auto maskDim = [&](int64_t w) -> Placement {  // the mask's placement for weights dim w
    const int64_t m = w - (weightsDims - static_cast<int64_t>(mask->size()));
    return m >= 0 && (*mask)[m] != 1 ? S(m) : R;
  };
  for (int64_t d = 0; d < n - 2; ++d) {
    c10::SmallVector<Placement, 4> in{S(d), S(d), S(d)};
    if (mask) in.push_back(maskDim(d));
    rows.push_back(row(in, S(d)));
  }
  if (!a.causal(ctx)) {
    c10::SmallVector<Placement, 4> in{S(n - 2), R, R};
    if (mask) in.push_back(maskDim(weightsDims - 2));
    rows.push_back(row(in, S(n - 2)));
  }
}
template <bool Packed>
void runAttention(KernelContext& ctx) {
  const AttentionAttrs a(ctx, Packed);
  const std::optional<at::Tensor> mask = a.hasMask(ctx) ? std::optional<at::Tensor>(ctx.input(3)) : std::nullopt;
  if (!Packed) {
    ctx.outputs.push_back(at::scaled_dot_product_attention(ctx.input(0), ctx.input(1), ctx.input(2), mask, 0.0, a.causal(ctx), a.scale(ctx)));
    return;
  }
  auto heads = [&](const at::Tensor& t) { return t.unflatten(-1, {a.heads, -1}).transpose(-3, -2); };  // a view
  const at::Tensor out = at::scaled_dot_product_attention(heads(ctx.input(0)), heads(ctx.input(1)), heads(ctx.input(2)), mask, 0.0, a.causal(ctx), a.scale(ctx));
  ctx.outputs.push_back(out.transpose(-3, -2).flatten(-2));
}

// ---- rotary_emb(x[..., S, ..., D], cos[S, D], sin[S, D]): attrs halves, tokensFromEnd --------
// diffusers' apply_rotary_emb (use_real): (x.float() * cos + rotated.float() * sin).to(x.dtype),
// rotated pairing neighbours (-x1, x0) or, with halves, the two halves (cat(-x2, x1)). The tokens
// are x's dim ndim - tokensFromEnd (2: [B, H, S, D]; 3: [B, S, H, D], diffusers' sequence_dim=1),
// the tables broadcast over the dims between. On GPUs one pass of DTorch's row kernel
// (external/cuda/rotary_emb); elsewhere those very ops.
// rms_norm_rotary_emb(x, weight?, cos, sin) (formed by fusion of rms_norm into the rotary_emb
// reading its output: per-head q/k norms, then the rotary): on GPUs one row kernel normalises,
// rounds as the norm writes, and rotates (external/cuda/rms_norm); elsewhere the two ops in turn.

int64_t tokensFromEnd(const InferContext& ctx) { return ctx.intAttr(1); }

void inferRotaryEmb(const InferContext& ctx, Outputs& out) {
  const TensorMeta& x = *ctx.inputs[0];
  const int64_t k = tokensFromEnd(ctx);
  if (k < 2 || k > x.ndim() || x.shape.back() % 2 != 0) {
    ctx.fail(kShapeMismatch, "x of shape " + formatShape(x.shape) + " must be [..., S, ..., D] with D even and the tokens " + std::to_string(k) +
                                 " dims from the end (at least 2)");
  }
  const Shape table{x.shape[x.ndim() - k], x.shape.back()};
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.inputs[i]->shape != table) {
      ctx.fail(kShapeMismatch, std::string(i == 1 ? "cos" : "sin") + " of shape " + formatShape(ctx.inputs[i]->shape) + " must be [S, D] = " + formatShape(table));
    }
    if (!isFloating(ctx.inputs[i]->dtype)) ctx.fail(kDtypeMismatch, "cos and sin must be floating");
  }
  if (!isFloating(x.dtype)) ctx.fail(kDtypeMismatch, "needs a floating x, got " + std::string(dtypeName(x.dtype)));
  out.push_back(outputLike(ctx, x.shape, x.dtype));
}
// Other dims of x (but the last) shard through with whole tables; the token dim shards with the
// tables' rows (whole tables are sliced locally, as a broadcast multiply slices them).
void rotaryEmbRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t n = ctx.inputs[0]->ndim(), tokens = n - tokensFromEnd(ctx);
  for (int64_t d = 0; d < n - 1; ++d) {
    if (d != tokens) rows.push_back(row({S(d), R, R}, S(d)));
  }
  rows.push_back(row({S(tokens), S(0), S(0)}, S(tokens), 0b110));
}

// rotary_emb's value: DTorch's row kernel where it serves x, else the unfused ops.
at::Tensor rotaryEmb(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool halves, int64_t tokensFromEnd) {
  if (std::optional<at::Tensor> fast = external::cuda::rotaryEmb(x, cos, sin, halves, tokensFromEnd)) return *fast;
  const int64_t d = x.size(-1);
  at::Tensor rotated;
  if (halves) {
    const std::vector<at::Tensor> parts = x.unflatten(-1, {2, d / 2}).unbind(-2);
    rotated = at::cat({parts[1].neg(), parts[0]}, -1);
  } else {
    const std::vector<at::Tensor> parts = x.unflatten(-1, {d / 2, 2}).unbind(-1);
    rotated = at::stack({parts[1].neg(), parts[0]}, -1).flatten(-2);
  }
  // [S, D] as [S, 1, ..., D] over the dims between the tokens and the last
  std::vector<int64_t> tableShape{cos.size(0)};
  tableShape.insert(tableShape.end(), tokensFromEnd - 2, 1);
  tableShape.push_back(d);
  at::Tensor out = x.to(at::kFloat).mul(cos.view(tableShape)).add(rotated.to(at::kFloat).mul(sin.view(tableShape)));
  return out.scalar_type() == x.scalar_type() ? out : out.to(x.scalar_type());
}

void runRotaryEmb(KernelContext& ctx) {
  ctx.outputs.push_back(rotaryEmb(ctx.input(0), ctx.input(1), ctx.input(2), ctx.intAttr(0) != 0, ctx.intAttr(1)));
}

void runRmsNormRotaryEmb(KernelContext& ctx) {
  const NormArgs norm = normArgs(ctx, 1);
  const auto n = static_cast<size_t>(ctx.intAttr(0));
  const bool halves = ctx.intAttr(4 + n) != 0;  // after the norm's attributes
  const int64_t k = ctx.intAttr(5 + n);
  const size_t tables = norm.weight ? 2 : 1;
  const at::Tensor &x = ctx.input(0), &cos = ctx.input(tables), &sin = ctx.input(tables + 1);
  if (norm.shape.size() == 1 && !halves) {
    if (std::optional<at::Tensor> fast = external::cuda::rmsNormRotaryLastDim(x, norm.weight, norm.eps, cos, sin, k)) {
      ctx.outputs.push_back(*fast);
      return;
    }
  }
  ctx.outputs.push_back(rotaryEmb(rmsNorm(x, norm), cos, sin, halves, k));
}

}  // namespace

void registerNnOps(OpRegistry& registry) {
  registry.add({"linear", -1, "(x, weight, bias?)", inferLinear, runLinear, linearRows});
  registry.add({"linear_gelu", 3, "(formed by fusion)", inferFormedByFusion, runLinearGelu});
  registry.add({"linear_add", 3, "(formed by fusion)", inferFormedByFusion, runLinearAdd, nullptr, runLinearAddInplace});
  registry.add({"layer_norm", -1, "nNorm, shape..., hasWeight, hasBias, eps", inferNorm, runLayerNorm, normRows});
  registry.add({"rms_norm", -1, "nNorm, shape..., hasWeight, hasBias(0), eps", inferNorm, runRmsNorm, normRows});
  registry.add({"group_norm", -1, "groups, hasWeight, hasBias, eps", inferGroupNorm, runGroupNorm, groupNormRows});
  registry.add({"group_norm_silu", -1, "(formed by fusion) groups, hasWeight, hasBias, eps", inferFormedByFusion, runGroupNormSilu});
  OpDef embedding{"embedding", 2, "", inferEmbedding, runEmbedding, embeddingRows};
  embedding.keepsInputMetas = true;
  registry.add(embedding);
  registry.add({"sdpa", -1, "hasMask, isCausal, hasScale, scale", inferAttention<false>, runAttention<false>, attentionRows<false>});
  registry.add({"sdpa_heads", -1, "heads, hasMask, isCausal, hasScale, scale", inferAttention<true>, runAttention<true>, attentionRows<true>});
  registry.add({"rotary_emb", 3, "halves, tokensFromEnd", inferRotaryEmb, runRotaryEmb, rotaryEmbRows});
  registry.add({"rms_norm_rotary_emb", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias(0), eps, halves, tokensFromEnd", inferFormedByFusion,
                runRmsNormRotaryEmb});
}

}  // namespace dtorch::core
