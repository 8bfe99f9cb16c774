#include "external/cuda/cat_rows.h"

#include <ATen/ATen.h>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernels/cat_rows.h"
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace k = kernels;

std::optional<at::Tensor> catRows(const std::vector<at::Tensor>& parts, int64_t dim) {
  if (parts.empty()) return std::nullopt;
  const at::Tensor& first = parts[0];
  const int64_t n = first.dim();
  if (!first.is_cuda() || n < 2 || n - 1 > k::kMaxLeadDims || dim < 0 || dim >= n - 1) return std::nullopt;
  const int64_t element = static_cast<int64_t>(first.element_size());
  const int64_t rowBytes = first.size(-1) * element;
  if (rowBytes == 0 || rowBytes % 16 != 0) return std::nullopt;
  bool strided = false;
  std::vector<int64_t> sizes = first.sizes().vec();
  sizes[dim] = 0;
  for (const at::Tensor& t : parts) {
    if (t.dim() != n || t.scalar_type() != first.scalar_type() || t.device() != first.device() || t.stride(-1) != 1 ||
        t.suggest_memory_format() != at::MemoryFormat::Contiguous || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) {
      return std::nullopt;
    }
    for (int64_t d = 0; d < n; ++d) {
      if (d != dim && t.size(d) != first.size(d)) return std::nullopt;
      if (d < n - 1 && t.size(d) > 1 && (t.stride(d) * element) % 16 != 0) return std::nullopt;  // a row start off 16 bytes
    }
    sizes[dim] += t.size(dim);
    strided = strided || !t.is_contiguous();
  }
  if (!strided) return std::nullopt;  // LibTorch's vectorized cat serves contiguous parts
  at::Tensor out = at::empty(sizes, first.options().memory_format(at::MemoryFormat::Contiguous));
  const auto stream = c10::cuda::getCurrentCUDAStream(first.device().index()).stream();
  auto* base = static_cast<char*>(out.data_ptr());
  int64_t offset = 0;  // along dim, in the result
  for (const at::Tensor& t : parts) {
    if (t.numel() > 0) {
      k::RowCopyLayout layout;
      layout.from.dims = static_cast<int>(n - 1);
      for (int64_t d = 0; d < n - 1; ++d) {
        layout.from.size[d] = t.size(d);
        layout.from.stride[d] = t.stride(d) * element;
        layout.toStride[d] = out.stride(d) * element;
      }
      const int error = k::copyRows(t.data_ptr(), base + offset * out.stride(dim) * element, t.numel() / t.size(-1), rowBytes, layout, stream);
      TORCH_CHECK(error == 0, "cat: DTorch's row copy failed to launch (CUDA error ", error, ")");
    }
    offset += t.size(dim);
  }
  return out;
}

#else

std::optional<at::Tensor> catRows(const std::vector<at::Tensor>&, int64_t) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
