// fp8_linear(x, weight, weightScale, bias?, inputAmax?): y = x Wᵀ + b with W held in FP8 (float8_e4m3fn or
// float8_e5m2, [out, in]) and one float32 scale per output row ([out]: W ≈ weight · scale), the
// recipe of torchao's row-wise float8 and of FP8 Flux/SD3 checkpoints: the activation is
// quantized per token (scale amax / 448, float8_e4m3fn with saturation), the two 8-bit operands
// multiplied with float32 accumulation, both scales applied to the product, the bias added, the
// output in x's dtype. GPUs: DTorch's row kernel quantizes x in one pass and at::_scaled_mm
// multiplies (cuBLASLt's FP8 matmul with row-wise scales on Hopper); elsewhere (CPU, other
// dtypes, sizes the FP8 matmul refuses) the same casts in float32, then a float32 matmul — the
// same quantized values, so both agree to float32 rounding. With inputAmax (float32 [..., 1]: each
// token's largest magnitude, taken over more columns than x holds), x is quantized with that
// amax: a linear whose input is split by columns (row parallel, or parts of a concatenated input)
// then quantizes every part as the whole row would be.
// Formed by the controller's fusion of the op that makes an FP8 linear's input into it, so that
// on GPUs the input's bfloat16 values never go through memory:
//   gelu_fp8_linear(x, weight, weightScale, bias?): fp8_linear(gelu(x, tanh), ...), an MLP's
//     hidden layer into its output linear; the row kernel applies the GELU as it quantizes;
//   layer_norm_modulate_fp8_linear(c, x, s, normWeight?, normBias?, weight, weightScale, bias?):
//     fp8_linear(layer_norm_modulate(c, x, s, ...), ...), adaLN's modulated norm into the linear
//     after it (the norm's attributes, then the linear's); the norm's row kernel quantizes its rows.
// Elsewhere the two ops run in turn: bit-identical to the unfused ops.
#include <ATen/ATen.h>

#include <atomic>

#include "common/error.h"
#include "core/operators/contraction_rows.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/fp8_quantize.h"
#include "external/cuda/kernels/fp8_rows.h"
#include "external/cuda/layer_norm_addcmul.h"

namespace dtorch::core {
namespace {

using common::code::kDtypeMismatch;
using common::code::kInvalidArgument;
using common::code::kShapeMismatch;
using external::cuda::kernels::kFp8E4m3Max;
using external::cuda::kernels::kFp8MinAmax;

bool hasBias(const InferContext& ctx) { return ctx.intAttr(0) != 0; }
bool hasInputAmax(const InferContext& ctx) { return ctx.intAttr(1) != 0; }

void inferFp8Linear(const InferContext& ctx, Outputs& out) {
  if (ctx.inputs.size() != 3 + static_cast<size_t>(hasBias(ctx)) + static_cast<size_t>(hasInputAmax(ctx))) {
    ctx.fail(kInvalidArgument, "takes x, weight, weightScale, then the bias and the input's amax its attributes announce");
  }
  const TensorMeta &x = *ctx.inputs[0], &w = *ctx.inputs[1], &scale = *ctx.inputs[2];
  if (w.ndim() != 2 || x.ndim() < 1 || x.shape.back() != w.shape[1]) {
    ctx.fail(kShapeMismatch, "x of shape " + formatShape(x.shape) + " and weight of shape " + formatShape(w.shape) +
                                 " do not fit: weight must be [out, in] with in = x's last dim");
  }
  if (!isFloat8(w.dtype)) {
    ctx.fail(kDtypeMismatch, "weight must be float8_e4m3fn or float8_e5m2, got " + std::string(dtypeName(w.dtype)) + "; use linear for other weights");
  }
  if (x.dtype != DType::Float && x.dtype != DType::BFloat16 && x.dtype != DType::Half) {
    ctx.fail(kDtypeMismatch, "x must be float32, bfloat16 or float16, got " + std::string(dtypeName(x.dtype)));
  }
  if (scale.dtype != DType::Float || scale.ndim() != 1 || scale.shape[0] != w.shape[0]) {
    ctx.fail(kShapeMismatch, "weightScale must be float32 [" + std::to_string(w.shape[0]) + "] (one per output row), got " +
                                 std::string(dtypeName(scale.dtype)) + " " + formatShape(scale.shape));
  }
  if (hasInputAmax(ctx)) {
    const TensorMeta& a = *ctx.inputs.back();
    Shape want = x.shape;
    want.back() = 1;
    if (a.dtype != DType::Float || a.shape != want) {
      ctx.fail(kShapeMismatch, "inputAmax must be float32 " + formatShape(want) + " (each token's amax), got " + std::string(dtypeName(a.dtype)) + " " + formatShape(a.shape));
    }
  }
  if (hasBias(ctx)) {
    const TensorMeta& b = *ctx.inputs[3];
    if (b.ndim() != 1 || b.shape[0] != w.shape[0] || b.dtype != x.dtype) {
      ctx.fail(kShapeMismatch, "bias must be " + std::string(dtypeName(x.dtype)) + " [" + std::to_string(w.shape[0]) + "], got " +
                                   std::string(dtypeName(b.dtype)) + " " + formatShape(b.shape));
    }
  }
  Shape shape = x.shape;
  shape.back() = w.shape[0];
  out.push_back(outputLike(ctx, std::move(shape), x.dtype));
}

// As linear's rows (the einsum ...k,nk,n->...n, the bias added), but never a partial x: the
// per-token scale of a partial sum is not the sum's. Split inputs (row parallel) are fine: each
// rank scales its own columns and the products add up.
void fp8LinearRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t last = ctx.inputs[0]->ndim() - 1;
  ContractionOperand x, w{{'n', 'k'}, {true, true}}, scale{{'n'}, {true}};
  for (int64_t i = 0; i < last; ++i) x.letters.push_back(static_cast<char>('A' + i)), x.whole.push_back(true);
  x.letters.push_back('k'), x.whole.push_back(true);
  std::vector<char> output(x.letters.begin(), x.letters.end() - 1);
  output.push_back('n');
  std::vector<ContractionOperand> operands{x, w, scale};
  if (hasBias(ctx)) operands.push_back({{'n'}, {true}, /*added=*/true});
  if (hasInputAmax(ctx)) {
    // each token's amax: split as x's tokens are, whole along its width-1 last dim
    ContractionOperand amax = x;
    amax.whole.back() = false;
    operands.push_back(amax);
  }
  SignatureRows all;
  contractionRows(operands, output, all);
  for (SignatureRow& row : all) {
    if (!row.inputs[0].isPartial()) rows.push_back(std::move(row));
  }
}

// x's tokens as float8_e4m3fn and their float32 scales [..., 1] (amax / 448, the amax of x's
// rows unless given), with LibTorch's casts: what DTorch's GPU kernel computes in one pass.
std::pair<at::Tensor, at::Tensor> quantizeInput(const at::Tensor& x, const std::optional<at::Tensor>& amax) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor xScale = (amax ? *amax : xf.abs().amax(-1, /*keepdim=*/true)).clamp_min(kFp8MinAmax).div(kFp8E4m3Max);
  return {xf.div(xScale).clamp(-kFp8E4m3Max, kFp8E4m3Max).to(at::kFloat8_e4m3fn), xScale};
}

// The recipe with casts, in float32 (see the file's comment).
at::Tensor dequantizedLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale, const std::optional<at::Tensor>& bias,
                             const std::optional<at::Tensor>& amax) {
  const auto [q, xScale] = quantizeInput(x, amax);
  const at::Tensor xq = q.to(at::kFloat).mul(xScale);
  const at::Tensor wd = w.to(at::kFloat).mul(scale.unsqueeze(1));
  return at::linear(xq, wd, bias ? std::optional<at::Tensor>(bias->to(at::kFloat)) : std::nullopt).to(x.scalar_type());
}

// Whether the FP8 matmul serves x and w: GPUs, bfloat16 x, float8_e4m3fn W, sizes cuBLASLt's FP8
// matmul takes (multiples of 16).
bool scaledMatmulServes(const at::Tensor& x, const at::Tensor& w) {
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kFloat8_e4m3fn && w.size(0) % 16 == 0 && w.size(1) % 16 == 0 &&
         x.numel() > 0;
}

// x's tokens as float8_e4m3fn [rows, in] and their float32 scales [rows, 1].
using QuantizedRows = std::pair<at::Tensor, at::Tensor>;

// Where scaledMatmulServes(x, w): x's quantized rows q times W in one FP8 matmul with row-wise
// scales and the bias in its epilogue, in x's shape but for the last dim.
at::Tensor scaledMatmul(const at::Tensor& x, const QuantizedRows& q, const at::Tensor& w, const at::Tensor& scale, const std::optional<at::Tensor>& bias) {
  const int64_t n = w.size(0);
  // torchao's forward recipe: fast accumulation in the output matmul
  const auto matmul = [&](const at::Tensor& weight) {
    return at::_scaled_mm(q.first, weight.t(), q.second, scale.view({1, n}), bias, std::nullopt, at::kBFloat16, /*use_fast_accum=*/true);
  };
  // A column block of a wider weight (a linear over concatenated inputs) is read where it lies
  // (a leading dimension wider than the block) unless the FP8 matmul refused that once; else copied.
  static std::atomic<bool> stridedRefused{false};
  at::Tensor y;
  if (!w.is_contiguous() && w.stride(1) == 1 && !stridedRefused.load()) {
    try {
      y = matmul(w);
    } catch (const c10::Error&) {
      stridedRefused = true;
    }
  }
  if (!y.defined()) y = matmul(w.is_contiguous() ? w : w.contiguous());
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = n;
  return y.view(shape);
}

// fp8_linear's product: the FP8 matmul where it serves x and w, else the recipe with casts.
at::Tensor fp8Product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale, const std::optional<at::Tensor>& bias,
                      const std::optional<at::Tensor>& amax) {
  if (!scaledMatmulServes(x, w)) return dequantizedLinear(x, w, scale, bias, amax);
  const at::Tensor rows = x.reshape({-1, w.size(1)});
  std::optional<QuantizedRows> q = amax ? std::nullopt : external::cuda::quantizeRowsFp8(rows);
  if (!q) q = quantizeInput(rows, amax ? std::optional<at::Tensor>(amax->reshape({-1, 1})) : std::nullopt);
  return scaledMatmul(x, *q, w, scale, bias);
}

std::optional<at::Tensor> biasOf(const KernelContext& ctx) { return ctx.intAttr(0) ? std::optional<at::Tensor>(ctx.input(3)) : std::nullopt; }

void runFp8Linear(KernelContext& ctx) {
  const std::optional<at::Tensor> amax = ctx.intAttr(1) ? std::optional<at::Tensor>(*ctx.inputs.back()) : std::nullopt;
  ctx.outputs.push_back(fp8Product(ctx.input(0), ctx.input(1), ctx.input(2), biasOf(ctx), amax));
}

// gelu_fp8_linear (see the file's comment): the row kernel's GELU where it serves x, else the
// GELU's output first, then fp8_linear's product (bit-identical to the unfused ops there).
void runGeluFp8Linear(KernelContext& ctx) {
  const at::Tensor &x = ctx.input(0), &w = ctx.input(1), &scale = ctx.input(2);
  const std::optional<at::Tensor> bias = biasOf(ctx);
  if (scaledMatmulServes(x, w)) {
    if (std::optional<QuantizedRows> q = external::cuda::quantizeGeluRowsFp8(x.reshape({-1, w.size(1)}))) {
      ctx.outputs.push_back(scaledMatmul(x, *q, w, scale, bias));
      return;
    }
  }
  ctx.outputs.push_back(fp8Product(at::gelu(x, "tanh"), w, scale, bias, std::nullopt));
}

// layer_norm_modulate_fp8_linear (see the file's comment): the norm's row kernel writing FP8 rows
// where it and the FP8 matmul serve the inputs (a parameter-free norm over the last dim), else
// layer_norm_modulate's output first, then fp8_linear's product.
void runLayerNormModulateFp8Linear(KernelContext& ctx) {
  const NormArgs norm = normArgs(ctx, 3);
  const size_t first = 3 + (norm.weight ? 1 : 0) + (norm.bias ? 1 : 0);  // the linear's weight
  const bool linearBias = ctx.intAttr(4 + static_cast<size_t>(ctx.intAttr(0))) != 0;  // after the norm's attributes
  const at::Tensor &x = ctx.input(1), &w = ctx.input(first), &scale = ctx.input(first + 1);
  const std::optional<at::Tensor> bias = linearBias ? std::optional<at::Tensor>(ctx.input(first + 2)) : std::nullopt;
  if (scaledMatmulServes(x, w) && norm.shape.size() == 1 && !norm.weight && !norm.bias) {
    if (std::optional<QuantizedRows> q = external::cuda::layerNormModulateFp8(x, ctx.input(0), ctx.input(2), norm.eps, 1)) {
      ctx.outputs.push_back(scaledMatmul(x, *q, w, scale, bias));
      return;
    }
  }
  ctx.outputs.push_back(fp8Product(modulatedLayerNorm(ctx, 1), w, scale, bias, std::nullopt));
}

}  // namespace

void registerFp8LinearOps(OpRegistry& registry) {
  registry.add({"fp8_linear", -1, "hasBias, hasInputAmax", inferFp8Linear, runFp8Linear, fp8LinearRows});
  registry.add({"gelu_fp8_linear", -1, "(formed by fusion) hasBias, hasInputAmax(0)", inferFormedByFusion, runGeluFp8Linear});
  registry.add({"layer_norm_modulate_fp8_linear", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias, eps, linearHasBias, hasInputAmax(0)",
                inferFormedByFusion, runLayerNormModulateFp8Linear});
}

}  // namespace dtorch::core
