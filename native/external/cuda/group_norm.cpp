#include "external/cuda/group_norm.h"

#include <ATen/ATen.h>

namespace dtorch::external::cuda {

namespace {
// LibTorch's kernel keeps up while there are enough rows to fill the GPU or rows are short
constexpr int64_t kMaxRows = 1024;
constexpr int64_t kMinRowLength = 1 << 15;
}  // namespace

std::optional<at::Tensor> groupNormLongRows(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& bias, double eps) {
  if (!x.is_cuda() || x.dim() < 2 || groups <= 0 || x.numel() == 0) return std::nullopt;
  const int64_t n = x.size(0), c = x.size(1);
  if (c % groups != 0) return std::nullopt;
  const int64_t row = x.numel() / (n * groups);
  if (n * groups > kMaxRows || row < kMinRowLength) return std::nullopt;
  at::Tensor mean, var;
  {
    // Welford in float32, as LibTorch's statistics (a float copy only while they are computed)
    const at::Tensor rows = (x.scalar_type() == at::kFloat ? x : x.to(at::kFloat)).reshape({n, groups, row});
    std::tie(var, mean) = at::var_mean(rows, {2}, /*correction=*/0, /*keepdim=*/true);
  }
  // per channel, folded as LibTorch folds them: y = x * a + b, a = rstd * gamma, b = beta - a * mean
  at::Tensor a = at::rsqrt(var + eps).expand({n, groups, c / groups}).reshape({n, c});
  if (weight) a = a * weight->to(at::kFloat);
  at::Tensor b = -a * mean.expand({n, groups, c / groups}).reshape({n, c});
  if (bias) b = b + bias->to(at::kFloat);
  std::vector<int64_t> perChannel{n, c};
  perChannel.resize(x.dim(), 1);
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  at::addcmul_out(y, b.view(perChannel), x, a.view(perChannel));  // computed in float, rounded once into y
  return y;
}

}  // namespace dtorch::external::cuda
