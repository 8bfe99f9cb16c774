#include "external/torch/torch_info.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <thread>

namespace dtorch::external::torch {

std::string libtorchVersion() { return TORCH_VERSION; }

bool builtWithCuda() { return at::hasCUDA(); }

int cudaDeviceCount() {
  if (!at::hasCUDA()) return 0;
  return static_cast<int>(at::getNumGPUs());
}

int cpuCores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string parallelInfo() { return at::get_parallel_info(); }

}  // namespace dtorch::external::torch
