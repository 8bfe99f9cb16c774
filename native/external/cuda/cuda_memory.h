// How LibTorch uses a GPU's memory and SMs. The CUDA caching allocator's own counters for one GPU: what torch.cuda.memory_allocated(),
// max_memory_allocated() and memory_reserved() report, so that peak memory compares with
// PyTorch's on the same measure. All zero without CUDA.
#pragma once
#include <cstdint>

namespace dtorch::external::cuda {

struct MemoryStats {
  int64_t allocatedBytes = 0;      // in tensors now
  int64_t peakAllocatedBytes = 0;  // highest since the last reset
  int64_t reservedBytes = 0;       // held by the allocator (cached included)
};

MemoryStats memoryStats(int device);
void resetPeakMemoryStats(int device);

// SMs that cuBLAS matmuls leave free (0: none), for collectives running beside them: Hopper's
// matmul kernels are persistent (one block per SM for their whole run), so a collective queued
// beside one cannot start until it ends. A process-wide LibTorch setting; matmuls go through
// cuBLASLt while it is set (the cuBLAS path ignores it).
void setSMCarveout(int sms);

}  // namespace dtorch::external::cuda
