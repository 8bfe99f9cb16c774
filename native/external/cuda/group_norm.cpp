#include "external/cuda/group_norm.h"

#include <ATen/ATen.h>

namespace dtorch::external::cuda {

namespace {
// LibTorch's kernel keeps up while there are enough rows to fill the GPU or rows are short
constexpr int64_t kMaxRows = 1024;
constexpr int64_t kMinRowLength = 1 << 15;
constexpr int64_t kMaxFloatCopy = int64_t{1} << 24;  // elements: 64 MiB of float32
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
    // Welford in float32, as LibTorch's statistics. A 16-bit input is widened a few rows at a
    // time (at most kMaxFloatCopy elements): a whole float copy of a VAE's last activations
    // would be 512 MiB at 1024², most of the decoder's peak memory
    const at::Tensor rows = x.reshape({n * groups, row});
    const int64_t perPart = x.scalar_type() == at::kFloat ? n * groups : std::max<int64_t>(1, kMaxFloatCopy / row);
    std::vector<at::Tensor> vars, means;
    for (int64_t r = 0; r < n * groups; r += perPart) {
      const at::Tensor part = rows.narrow(0, r, std::min(perPart, n * groups - r)).to(at::kFloat);
      auto [v, m] = at::var_mean(part, {1}, /*correction=*/0, /*keepdim=*/true);
      vars.push_back(std::move(v));
      means.push_back(std::move(m));
    }
    var = (vars.size() == 1 ? vars[0] : at::cat(vars)).view({n, groups, 1});
    mean = (means.size() == 1 ? means[0] : at::cat(means)).view({n, groups, 1});
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
