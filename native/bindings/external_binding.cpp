// @dtorch/external's slice: facts about LibTorch and the devices it sees.
#include <napi.h>

#include "bindings/binding_util.h"
#include "bindings/store_handles.h"
#include "external/cuda/cuda_memory.h"
#include "external/nccl/communicator.h"
#include "external/torch/kernel_trace.h"
#include "external/torch/rendezvous_store.h"
#include "external/torch/torch_info.h"

#include <functional>
#include <map>
#include <thread>
#include "common/error.h"

namespace dtorch::bindings {

namespace {

using external::torch::RendezvousStore;

// The open rendezvous stores by handle (JS thread only); a store's own calls are thread-safe.
std::map<int, std::shared_ptr<RendezvousStore>>& stores() {
  static std::map<int, std::shared_ptr<RendezvousStore>> open;
  return open;
}

std::shared_ptr<RendezvousStore> storeOf(const Napi::Value& handle) {
  auto it = stores().find(handle.As<Napi::Number>().Int32Value());
  if (it == stores().end()) throw common::DTorchError(common::code::kInvalidArgument, "rendezvous store: it was closed");
  return it->second;
}

// Runs `work` (a store call that may wait on the network) on a thread of its own and settles a
// promise with `done`'s value or the DTorchError it threw. Not libuv's pool: Node joins the pool
// at exit, so a call blocked on a dead main node would hold the process for the store's whole
// timeout; a detached thread does not, and the thread-safe function keeps the loop alive only
// while a call is in flight.
Napi::Promise queue(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done) {
  struct Outcome {
    bool ok = true;
    std::string code, message;
  };
  auto deferred = std::make_shared<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
  Napi::Promise promise = deferred->Promise();
  auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "dtorch-rendezvous-store", 0, 1);
  std::thread([tsfn, work = std::move(work), done = std::move(done), deferred]() mutable {
    auto outcome = std::make_shared<Outcome>();
    try {
      work();
    } catch (const common::DTorchError& e) {
      *outcome = {false, e.code(), e.what()};
    } catch (const std::exception& e) {
      *outcome = {false, common::code::kInternal, e.what()};
    }
    tsfn.BlockingCall([deferred, done, outcome](Napi::Env e, Napi::Function) {
      if (outcome->ok) deferred->Resolve(done(e));
      else deferred->Reject(makeError(e, outcome->code, outcome->message).Value());
    });
    tsfn.Release();
  }).detach();
  return promise;
}

int nextStoreHandle = 1;

void initStores(Napi::Env env, Napi::Object slice) {
  // storeServe(host, port, timeoutMs) -> handle: serves a c10d TCPStore (port 0: a free one)
  slice.Set("storeServe", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = RendezvousStore::serve(info[0].As<Napi::String>(), info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int64Value());
      const int handle = nextStoreHandle++;
      stores()[handle] = store;
      return Napi::Number::New(info.Env(), handle);
    });
  }));
  // storeConnect(host, port, timeoutMs) -> Promise<handle>
  slice.Set("storeConnect", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto result = std::make_shared<std::shared_ptr<RendezvousStore>>();
      std::string host = info[0].As<Napi::String>();
      const int port = info[1].As<Napi::Number>().Int32Value();
      const int64_t timeoutMs = info[2].As<Napi::Number>().Int64Value();
      return queue(info.Env(), [=] { *result = RendezvousStore::connect(host, port, timeoutMs); }, [result](Napi::Env e) -> Napi::Value {
        const int handle = nextStoreHandle++;
        stores()[handle] = *result;
        return Napi::Number::New(e, handle);
      });
    });
  }));
  slice.Set("storePort", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value { return Napi::Number::New(info.Env(), storeOf(info[0])->port()); });
  }));
  // storeSet(handle, key, bytes) -> Promise<void>
  slice.Set("storeSet", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = storeOf(info[0]);
      std::string key = info[1].As<Napi::String>();
      auto bytes = info[2].As<Napi::Uint8Array>();
      std::vector<uint8_t> value(bytes.Data(), bytes.Data() + bytes.ByteLength());
      return queue(info.Env(), [=] { store->set(key, value); }, [](Napi::Env e) -> Napi::Value { return e.Undefined(); });
    });
  }));
  // storeGet(handle, key) -> Promise<Buffer>: waits for the key (TIMEOUT after the store's timeout)
  slice.Set("storeGet", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = storeOf(info[0]);
      std::string key = info[1].As<Napi::String>();
      auto value = std::make_shared<std::vector<uint8_t>>();
      return queue(info.Env(), [=] { *value = store->get(key); }, [value](Napi::Env e) -> Napi::Value {
        return Napi::Buffer<uint8_t>::Copy(e, value->data(), value->size());
      });
    });
  }));
  // storeAdd(handle, key, delta) -> Promise<number>
  slice.Set("storeAdd", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = storeOf(info[0]);
      std::string key = info[1].As<Napi::String>();
      const int64_t delta = info[2].As<Napi::Number>().Int64Value();
      auto sum = std::make_shared<int64_t>(0);
      return queue(info.Env(), [=] { *sum = store->add(key, delta); }, [sum](Napi::Env e) -> Napi::Value { return Napi::Number::New(e, static_cast<double>(*sum)); });
    });
  }));
  // storeClose(handle): the store closes once no queued call holds it
  slice.Set("storeClose", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      stores().erase(info[0].As<Napi::Number>().Int32Value());
      return info.Env().Undefined();
    });
  }));
}

}  // namespace

std::shared_ptr<RendezvousStore> storeOfHandle(const Napi::Value& handle) { return storeOf(handle); }

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
  // the GPU work since startKernelTrace (top, gaps): per device its events, busy time and idle
  // gaps, the top kernels
  slice.Set("stopKernelTrace", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      const auto trace = external::torch::stopKernelTrace(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Number>().Int32Value());
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
        Napi::Object idle = Napi::Object::New(env);
        idle.Set("shortMs", static_cast<double>(d.idleShortNs) / 1e6);
        idle.Set("mediumMs", static_cast<double>(d.idleMediumNs) / 1e6);
        idle.Set("longMs", static_cast<double>(d.idleLongNs) / 1e6);
        entry.Set("idleByGap", idle);
        Napi::Array gaps = Napi::Array::New(env);
        for (size_t g = 0; g < d.longestGaps.size(); ++g) {
          Napi::Object gap = Napi::Object::New(env);
          gap.Set("ms", static_cast<double>(d.longestGaps[g].ns) / 1e6);
          gap.Set("atMs", static_cast<double>(d.longestGaps[g].atNs) / 1e6);
          gap.Set("before", d.longestGaps[g].before);
          gap.Set("after", d.longestGaps[g].after);
          gaps.Set(static_cast<uint32_t>(g), gap);
        }
        entry.Set("longestGaps", gaps);
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
  initStores(env, slice);
  return slice;
}

}  // namespace dtorch::bindings
