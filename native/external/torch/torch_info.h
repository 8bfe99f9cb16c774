// Facts about the LibTorch this addon was built against and runs with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtorch::external::torch {

std::string libtorchVersion();   // e.g. "2.13.0"
bool builtWithCuda();
int cudaDeviceCount();           // 0 without CUDA
int cpuCores();
std::string parallelInfo();      // at::get_parallel_info()

struct CudaDeviceInfo {
  int index;
  std::string name;
  int64_t totalMemory;  // bytes
  int major, minor;     // compute capability
};
std::vector<CudaDeviceInfo> cudaDevices();  // empty without CUDA

}  // namespace dtorch::external::torch
