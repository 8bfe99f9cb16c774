// Facts about the LibTorch this addon was built against and runs with.
#pragma once
#include <string>

namespace dtorch::external::torch {

std::string libtorchVersion();   // e.g. "2.13.0"
bool builtWithCuda();
int cudaDeviceCount();           // 0 without CUDA
int cpuCores();
std::string parallelInfo();      // at::get_parallel_info()

}  // namespace dtorch::external::torch
