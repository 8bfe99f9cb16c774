#include "external/cuda/group_norm.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernel_float_type.h"
#include "external/cuda/kernels/group_norm_rows.h"
#endif

namespace dtorch::external::cuda {

namespace {
// LibTorch's kernel keeps up while there are enough rows to fill the GPU or rows are short
constexpr int64_t kMaxRows = 1024;
constexpr int64_t kMinRowLength = 1 << 15;
constexpr int64_t kMaxFloatCopy = int64_t{1} << 24;  // elements: 64 MiB of float32

// Whether x [N, C, H, W] lies channels last and not also contiguous (a convolution's output with
// DTORCH_CONV_CHANNELS_LAST).
bool channelsLast(const at::Tensor& x) { return !x.is_contiguous() && x.dim() == 4 && x.is_contiguous(at::MemoryFormat::ChannelsLast); }

#ifdef DTORCH_WITH_CUDA
// Whether `t` (a weight or bias) is what the kernel reads for x's c channels: absent, or c
// contiguous values of x's dtype on x's device.
bool perChannel(const std::optional<at::Tensor>& t, const at::Tensor& x, int64_t c) {
  return !t || (t->device() == x.device() && t->scalar_type() == x.scalar_type() && t->dim() == 1 && t->size(0) == c && t->is_contiguous());
}
#endif

// x's group norm (then its SiLU) through DTorch's kernels where they take x (see the header), else
// nullopt: laid out [N, C, ...] contiguously, or channels last (a 4-d tensor as cuDNN's
// convolutions leave it on Hopper: the output keeps that layout).
std::optional<at::Tensor> groupNormKernel(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                          const std::optional<at::Tensor>& bias, double eps, bool silu) {
#ifdef DTORCH_WITH_CUDA
  if (!x.is_cuda() || x.dim() < 2 || groups <= 0 || x.numel() == 0) return std::nullopt;
  const bool last = channelsLast(x);
  if (!x.is_contiguous() && !last) return std::nullopt;
  const std::optional<kernels::FloatType> type = kernelFloatType(x.scalar_type());
  const int64_t n = x.size(0), c = x.size(1);
  if (!type || c % groups != 0 || n * groups > 65535) return std::nullopt;
  const int64_t spatial = x.numel() / (n * c), vec = 16 / static_cast<int64_t>(x.element_size());
  if ((last ? c : spatial) % vec != 0 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0 || !perChannel(weight, x, c) || !perChannel(bias, x, c)) {
    return std::nullopt;
  }
  const int64_t floats = last ? kernels::groupNormLastScratchFloats(*type, n, c, groups, spatial) : kernels::groupNormScratchFloats(*type, n, c, groups, spatial);
  if (floats < 0 || (last && n > 65535)) return std::nullopt;
  at::Tensor y = at::empty_like(x, last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  at::Tensor scratch = at::empty({floats}, x.options().dtype(at::kFloat));
  const auto rows = last ? kernels::groupNormLastRows : kernels::groupNormRows;
  const int error = rows(*type, x.data_ptr(), weight ? weight->data_ptr() : nullptr, bias ? bias->data_ptr() : nullptr, y.data_ptr(), scratch.data_ptr<float>(), n,
                         c, groups, spatial, static_cast<float>(eps), silu, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == 0, "group_norm: DTorch's group norm kernel failed to launch (CUDA error ", error, ")");
  return y;
#else
  return std::nullopt;
#endif
}
}  // namespace

std::optional<at::Tensor> groupNormLongRows(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& bias, double eps) {
  if (!x.is_cuda() || x.dim() < 2 || groups <= 0 || x.numel() == 0) return std::nullopt;
  const int64_t n = x.size(0), c = x.size(1);
  if (c % groups != 0) return std::nullopt;
  const int64_t row = x.numel() / (n * groups);
  // channels last (a convolution's output on Hopper): DTorch's kernel at any length, where
  // LibTorch's would first copy x to [N, C, H, W]
  const bool longRows = n * groups <= kMaxRows && row >= kMinRowLength;
  if (!longRows && !channelsLast(x)) return std::nullopt;
  if (std::optional<at::Tensor> y = groupNormKernel(x, groups, weight, bias, eps, /*silu=*/false)) return y;
  if (!longRows) return std::nullopt;
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

std::optional<at::Tensor> groupNormSilu(const at::Tensor& x, int64_t groups, const std::optional<at::Tensor>& weight,
                                        const std::optional<at::Tensor>& bias, double eps) {
  return groupNormKernel(x, groups, weight, bias, eps, /*silu=*/true);
}

}  // namespace dtorch::external::cuda
