#include "external/torch/torch_info.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <thread>

#ifdef DTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace dtorch::external::torch {

std::string libtorchVersion() { return TORCH_VERSION; }

bool builtWithCuda() { return at::hasCUDA(); }

int cudaDeviceCount() {
  if (!at::hasCUDA()) return 0;
  return static_cast<int>(at::getNumGPUs());
}

int cpuCores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string parallelInfo() { return at::get_parallel_info(); }

std::vector<CudaDeviceInfo> cudaDevices() {
  std::vector<CudaDeviceInfo> out;
#ifdef DTORCH_WITH_CUDA
  for (int i = 0; i < cudaDeviceCount(); ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    out.push_back({i, p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor});
  }
#endif
  return out;
}

}  // namespace dtorch::external::torch
