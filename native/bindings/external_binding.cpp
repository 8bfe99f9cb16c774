// @dtorch/external's slice: facts about LibTorch and the devices it sees.
#include <napi.h>

#include "bindings/binding_util.h"
#include "external/cuda/cuda_memory.h"
#include "external/nccl/communicator.h"
#include "external/torch/kernel_trace.h"
#include "external/torch/torch_info.h"

namespace dtorch::bindings {

Napi::Object initExternal(Napi::Env env) {
  Napi::Object slice = Napi::Object::New(env);
  slice.Set("torchInfo", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      namespace t = external::torch;
      Napi::Env env = info.Env();
      Napi::Object out = Napi::Object::New(env);
      out.Set("libtorchVersion", t::libtorchVersion());
      out.Set("builtWithCuda", t::builtWithCuda());
      out.Set("cudaDeviceCount", t::cudaDeviceCount());
      out.Set("cpuCores", t::cpuCores());
      out.Set("parallelInfo", t::parallelInfo());
      Napi::Array devices = Napi::Array::New(env);
      for (const t::CudaDeviceInfo& d : t::cudaDevices()) {
        Napi::Object entry = Napi::Object::New(env);
        entry.Set("index", d.index);
        entry.Set("name", d.name);
        entry.Set("totalMemory", static_cast<double>(d.totalMemory));
        entry.Set("computeCapability", std::to_string(d.major) + "." + std::to_string(d.minor));
        devices.Set(static_cast<uint32_t>(d.index), entry);
      }
      out.Set("cudaDevices", devices);
      out.Set("ncclVersion", external::nccl::version());
      return out;
    });
  }));
  // the caching allocator's counters of one GPU (the index was checked in JS)
  slice.Set("cudaMemoryStats", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      const auto stats = external::cuda::memoryStats(info[0].As<Napi::Number>().Int32Value());
      Napi::Object out = Napi::Object::New(info.Env());
      out.Set("allocatedBytes", static_cast<double>(stats.allocatedBytes));
      out.Set("peakAllocatedBytes", static_cast<double>(stats.peakAllocatedBytes));
      out.Set("reservedBytes", static_cast<double>(stats.reservedBytes));
      return out;
    });
  }));
  slice.Set("setCudaSMCarveout", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      external::cuda::setSMCarveout(info[0].As<Napi::Number>().Int32Value());
      return info.Env().Undefined();
    });
  }));
  slice.Set("resetCudaPeakMemoryStats", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      external::cuda::resetPeakMemoryStats(info[0].As<Napi::Number>().Int32Value());
      return info.Env().Undefined();
    });
  }));
  slice.Set("startKernelTrace", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      external::torch::startKernelTrace();
      return info.Env().Undefined();
    });
  }));
  // the GPU work since startKernelTrace: per device its events and busy time, the top kernels
  slice.Set("stopKernelTrace", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      const auto trace = external::torch::stopKernelTrace(info[0].As<Napi::Number>().Int32Value());
      Napi::Env env = info.Env();
      Napi::Object out = Napi::Object::New(env);
      Napi::Array devices = Napi::Array::New(env);
      for (size_t i = 0; i < trace.devices.size(); ++i) {
        const auto& d = trace.devices[i];
        Napi::Object entry = Napi::Object::New(env);
        entry.Set("device", d.device);
        entry.Set("events", static_cast<double>(d.events));
        entry.Set("busyMs", static_cast<double>(d.busyNs) / 1e6);
        entry.Set("spanMs", static_cast<double>(d.lastEndNs - d.firstStartNs) / 1e6);
        devices.Set(static_cast<uint32_t>(i), entry);
      }
      Napi::Array top = Napi::Array::New(env);
      for (size_t i = 0; i < trace.top.size(); ++i) {
        Napi::Object entry = Napi::Object::New(env);
        entry.Set("name", trace.top[i].name);
        entry.Set("calls", static_cast<double>(trace.top[i].calls));
        entry.Set("totalMs", static_cast<double>(trace.top[i].totalNs) / 1e6);
        top.Set(static_cast<uint32_t>(i), entry);
      }
      out.Set("devices", devices);
      out.Set("top", top);
      return out;
    });
  }));
  return slice;
}

}  // namespace dtorch::bindings
