#include "external/cuda/layer_norm_addcmul.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <ATen/ExpandUtils.h>
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/layer_norm_addcmul_rows.h"
#include "external/cuda/row_operand_of.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

namespace {

// x as the row kernel's [batch, rows, d], when the kernel takes it.
struct NormRows {
  k::FloatType type;
  int64_t batch, rows, d;
};

std::optional<NormRows> normRowsOf(const at::Tensor& x) {
  if (!x.is_cuda()) return std::nullopt;
  const std::optional<k::FloatType> type = kernelFloatType(x.scalar_type());
  if (!type || (x.dim() != 2 && x.dim() != 3) || !x.is_contiguous() || x.numel() == 0) return std::nullopt;
  const int64_t d = x.size(-1), vec = 16 / static_cast<int64_t>(x.element_size());
  if (d % vec != 0 || d > k::maxLayerNormRow(*type) || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) return std::nullopt;
  return NormRows{*type, x.dim() == 3 ? x.size(0) : 1, x.size(-2), d};
}

bool sameKind(const at::Tensor& t, const at::Tensor& x) { return t.scalar_type() == x.scalar_type() && t.device() == x.device(); }

// The row stride of `into` (x's shape, rows one after another across the batch, 16-byte aligned
// rows), or nullopt when the kernel cannot write there.
std::optional<int64_t> rowStrideOf(const at::Tensor& into, const at::Tensor& x) {
  if (into.sizes() != x.sizes() || into.scalar_type() != x.scalar_type() || into.device() != x.device() || into.stride(-1) != 1) return std::nullopt;
  const int64_t stride = into.stride(-2);
  if (x.dim() == 3 && x.size(0) > 1 && into.stride(0) != stride * x.size(1)) return std::nullopt;
  const auto bytes = static_cast<int64_t>(x.element_size());
  if ((stride * bytes) % 16 != 0 || reinterpret_cast<uintptr_t>(into.data_ptr()) % 16 != 0) return std::nullopt;
  return stride;
}

at::Tensor launchRows(const at::Tensor& x, const NormRows& r, k::RowOperand c, k::RowOperand b, double eps, bool roundNorm, double bOffset = 0,
                      const at::Tensor* into = nullptr, int64_t intoRowStride = 0) {
  at::Tensor y = into ? *into : at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const int error = k::layerNormAddcmulRows(r.type, x.data_ptr(), c, b, y.data_ptr(), r.batch, r.rows, r.d, static_cast<float>(eps),
                                            c10::cuda::getCurrentCUDAStream(x.device().index()).stream(), roundNorm,
                                            static_cast<float>(bOffset), intoRowStride);
  TORCH_CHECK(error == 0, "layer_norm: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return y;
}

// c and b as the row kernel's operands for x, when it serves the three (layerNormAddcmul's checks).
struct ModulatedRows {
  NormRows rows;
  k::RowOperand shift, scale;
};

std::optional<ModulatedRows> modulatedRowsOf(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b) {
  if (!sameKind(c, x) || !sameKind(b, x)) return std::nullopt;
  const std::optional<NormRows> rows = normRowsOf(x);
  if (!rows) return std::nullopt;
  // c and b broadcast to x (the op checked they broadcast together); one larger than x is not ours
  if (at::infer_size(at::infer_size(c.sizes(), x.sizes()), b.sizes()) != x.sizes().vec()) return std::nullopt;
  const std::optional<k::RowOperand> shift = rowOperandOf(c, x.sizes()), scale = rowOperandOf(b, x.sizes());
  if (!shift || !scale) return std::nullopt;
  return ModulatedRows{*rows, *shift, *scale};
}

}  // namespace

std::optional<at::Tensor> layerNormAddcmul(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps, double bOffset,
                                           const at::Tensor* into) {
  const std::optional<ModulatedRows> m = modulatedRowsOf(x, c, b);
  if (!m) return std::nullopt;
  const std::optional<int64_t> intoRowStride = into ? rowStrideOf(*into, x) : std::optional<int64_t>(0);
  if (!intoRowStride) return std::nullopt;
  return launchRows(x, m->rows, m->shift, m->scale, eps, /*roundNorm=*/true, bOffset, into, *intoRowStride);
}

std::optional<std::pair<at::Tensor, at::Tensor>> layerNormModulateFp8(const at::Tensor& x, const at::Tensor& c, const at::Tensor& b, double eps,
                                                                      double bOffset) {
  const std::optional<ModulatedRows> m = modulatedRowsOf(x, c, b);
  if (!m || m->rows.type != k::FloatType::kBFloat16) return std::nullopt;
  const int64_t tokens = m->rows.batch * m->rows.rows;
  at::Tensor q = at::empty({tokens, m->rows.d}, x.options().dtype(at::kFloat8_e4m3fn));
  at::Tensor scale = at::empty({tokens, 1}, x.options().dtype(at::kFloat));
  const int error = k::layerNormModulateFp8Rows(m->rows.type, x.data_ptr(), m->shift, m->scale, static_cast<uint8_t*>(q.data_ptr()), scale.data_ptr<float>(),
                                                m->rows.batch, m->rows.rows, m->rows.d, static_cast<float>(eps), static_cast<float>(bOffset),
                                                c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "layer_norm_modulate_fp8_linear: DTorch's row kernel failed to launch (CUDA error ", error, ")");
  return std::make_pair(q, scale);
}

std::optional<at::Tensor> layerNormAffine(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  if (!sameKind(weight, x) || !sameKind(bias, x) || weight.dim() != 1 || bias.dim() != 1) return std::nullopt;
  const std::optional<NormRows> rows = normRowsOf(x);
  if (!rows || weight.size(0) != rows->d || bias.size(0) != rows->d) return std::nullopt;
  const std::optional<k::RowOperand> w = rowOperandOf(weight, x.sizes()), b = rowOperandOf(bias, x.sizes());
  if (!w || !b) return std::nullopt;
  return launchRows(x, *rows, *b, *w, eps, /*roundNorm=*/false);
}

#else

std::optional<at::Tensor> layerNormAddcmul(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, double, const at::Tensor*) {
  return std::nullopt;
}
std::optional<at::Tensor> layerNormAffine(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) { return std::nullopt; }
std::optional<std::pair<at::Tensor, at::Tensor>> layerNormModulateFp8(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, double) {
  return std::nullopt;
}

#endif

}  // namespace dtorch::external::cuda
