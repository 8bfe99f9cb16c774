// @dtorch/external's slice: facts about LibTorch and the devices it sees.
#include <napi.h>

#include "bindings/binding_util.h"
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
      return out;
    });
  }));
  return slice;
}

}  // namespace dtorch::bindings
