#include "external/cuda/cuda_memory.h"

#include <ATen/Context.h>

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
  at::globalContext()._setSMCarveout_EXPERIMENTAL(sms > 0 ? std::optional<int32_t>(sms) : std::nullopt);
}

#else

MemoryStats memoryStats(int) { return {}; }
void resetPeakMemoryStats(int) {}
void setSMCarveout(int) {}

#endif

}  // namespace dtorch::external::cuda
