#include "external/cuda/cuda_memory.h"

#include <ATen/Context.h>

#include <optional>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace alloc = c10::cuda::CUDACachingAllocator;

MemoryStats memoryStats(int device) {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);  // the allocator exists once CUDA is up
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak, stats.reserved_bytes[all].current};
}

void resetPeakMemoryStats(int device) {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

void setSMCarveout(int sms) {
  // only cuBLASLt honours an SM count target: prefer it while a carve-out is set
  static std::optional<at::BlasBackend> before;
  auto& context = at::globalContext();
  if (sms > 0) {
    if (!before) before = context.blasPreferredBackend();
    context.setBlasPreferredBackend(at::BlasBackend::Cublaslt);
    context._setSMCarveout_EXPERIMENTAL(sms);
  } else {
    context._setSMCarveout_EXPERIMENTAL(std::nullopt);
    if (before) context.setBlasPreferredBackend(*before);
    before.reset();
  }
}

#else

MemoryStats memoryStats(int) { return {}; }
void resetPeakMemoryStats(int) {}
void setSMCarveout(int) {}

#endif

}  // namespace dtorch::external::cuda
