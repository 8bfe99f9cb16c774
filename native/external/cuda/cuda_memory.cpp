#include "external/cuda/cuda_memory.h"

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

namespace alloc = c10::cuda::CUDACachingAllocator;

MemoryStats memoryStats(int device) {
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak, stats.reserved_bytes[all].current};
}

void resetPeakMemoryStats(int device) { alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device)); }

#else

MemoryStats memoryStats(int) { return {}; }
void resetPeakMemoryStats(int) {}

#endif

}  // namespace dtorch::external::cuda
