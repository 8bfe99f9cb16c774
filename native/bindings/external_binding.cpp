// @dtorch/external's slice: facts about LibTorch and the devices it sees.
#include <napi.h>

#include "bindings/binding_util.h"
#include "bindings/store_handles.h"
#include "external/cuda/cuda_memory.h"
#include "external/cuda/tuned_matmul.h"
#include "external/nccl/communicator.h"
#include "external/torch/kernel_trace.h"
#include "external/torch/rendezvous_store.h"
#include "external/torch/torch_info.h"

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include "common/error.h"

namespace dtorch::bindings {

namespace {

using external::torch::RendezvousStore;
using external::torch::StoreRelay;
using external::torch::StoreReply;
using external::torch::StoreRequest;

// The thread-safe function a relayed store hands its requests to (JS sends them to the main
// node). Released once: by storeClose, or by the environment's teardown, whichever comes first;
// a request after that fails at once.
struct RelaySender {
  std::mutex mutex;
  bool released = false;
  Napi::ThreadSafeFunction tsfn;
  std::thread::id jsThread;
  std::weak_ptr<StoreRelay> relay;

  void release(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (released) return;
      released = true;
      tsfn.Release();
    }
    if (auto r = relay.lock()) r->end(why);
  }
};

// An open store: the store, and for a relayed one the sender of its requests.
struct OpenStore {
  std::shared_ptr<RendezvousStore> store;
  std::shared_ptr<RelaySender> sender;
  napi_env env = nullptr;
};

// The open rendezvous stores by handle (JS thread only); a store's own calls are thread-safe.
std::map<int, OpenStore>& stores() {
  static std::map<int, OpenStore> open;
  return open;
}

std::shared_ptr<RendezvousStore> storeOf(const Napi::Value& handle) {
  auto it = stores().find(handle.As<Napi::Number>().Int32Value());
  if (it == stores().end()) throw common::DTorchError(common::code::kInvalidArgument, "rendezvous store: it was closed");
  return it->second.store;
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
      guardedCallback("a rendezvous store call's result", [&] {
        if (outcome->ok) deferred->Resolve(done(e));
        else deferred->Reject(makeError(e, outcome->code, outcome->message).Value());
      });
    });
    tsfn.Release();
  }).detach();
  return promise;
}

int nextStoreHandle = 1;

int keep(OpenStore open) {
  const int handle = nextStoreHandle++;
  stores()[handle] = std::move(open);
  return handle;
}

std::vector<uint8_t> bytesFrom(const Napi::Value& value, const char* what) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    throw common::DTorchError(common::code::kInvalidArgument, std::string("rendezvous store request: ") + what + " must be a Uint8Array");
  }
  auto bytes = value.As<Napi::Uint8Array>();
  return {bytes.Data(), bytes.Data() + bytes.ByteLength()};
}

// { op, keys, value, expected, delta, timeoutMs } (store_relay.ts's StoreRequest)
StoreRequest requestFromJs(const Napi::Value& value) {
  using common::DTorchError;
  if (!value.IsObject()) throw DTorchError(common::code::kInvalidArgument, "rendezvous store request: expected an object");
  Napi::Object o = value.As<Napi::Object>();
  StoreRequest r;
  const std::string op = o.Get("op").ToString().Utf8Value();
  bool known = false;
  for (auto candidate : {StoreRequest::Op::kSet, StoreRequest::Op::kGet, StoreRequest::Op::kAdd, StoreRequest::Op::kCheck, StoreRequest::Op::kWait,
                         StoreRequest::Op::kDeleteKey, StoreRequest::Op::kNumKeys, StoreRequest::Op::kCompareSet}) {
    if (op == external::torch::storeOpName(candidate)) r.op = candidate, known = true;
  }
  if (!known) throw DTorchError(common::code::kInvalidArgument, "rendezvous store request: unknown op " + op.substr(0, 32));
  Napi::Value keys = o.Get("keys");
  if (!keys.IsArray()) throw DTorchError(common::code::kInvalidArgument, "rendezvous store request: keys must be an array of strings");
  Napi::Array list = keys.As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); ++i) {
    if (!list.Get(i).IsString()) throw DTorchError(common::code::kInvalidArgument, "rendezvous store request: keys must be an array of strings");
    r.keys.push_back(list.Get(i).As<Napi::String>().Utf8Value());
  }
  r.value = bytesFrom(o.Get("value"), "value");
  r.expected = bytesFrom(o.Get("expected"), "expected");
  r.delta = o.Get("delta").ToNumber().Int64Value();
  r.timeoutMs = o.Get("timeoutMs").ToNumber().Int64Value();
  return r;
}

Napi::Object requestToJs(Napi::Env env, const StoreRequest& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("op", external::torch::storeOpName(r.op));
  Napi::Array keys = Napi::Array::New(env, r.keys.size());
  for (size_t i = 0; i < r.keys.size(); ++i) keys.Set(static_cast<uint32_t>(i), r.keys[i]);
  o.Set("keys", keys);
  o.Set("value", Napi::Buffer<uint8_t>::Copy(env, r.value.data(), r.value.size()));
  o.Set("expected", Napi::Buffer<uint8_t>::Copy(env, r.expected.data(), r.expected.size()));
  o.Set("delta", static_cast<double>(r.delta));
  o.Set("timeoutMs", static_cast<double>(r.timeoutMs));
  return o;
}

// { errorCode, errorMessage, value, number } (store_relay.ts's StoreReply)
StoreReply replyFromJs(const Napi::Value& value) {
  if (!value.IsObject()) throw common::DTorchError(common::code::kInvalidArgument, "rendezvous store reply: expected an object");
  Napi::Object o = value.As<Napi::Object>();
  StoreReply r;
  r.code = o.Get("errorCode").ToString().Utf8Value();
  r.message = o.Get("errorMessage").ToString().Utf8Value();
  r.value = bytesFrom(o.Get("value"), "value");
  r.number = o.Get("number").ToNumber().Int64Value();
  return r;
}

Napi::Object replyToJs(Napi::Env env, const StoreReply& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("errorCode", r.code);
  o.Set("errorMessage", r.message);
  o.Set("value", Napi::Buffer<uint8_t>::Copy(env, r.value.data(), r.value.size()));
  o.Set("number", static_cast<double>(r.number));
  return o;
}

// A relayed request on its way to JS: the id, the request and the relay to fail it on if JS throws.
struct Outgoing {
  uint64_t id;
  StoreRequest request;
  std::weak_ptr<StoreRelay> relay;
};

void sendToJs(Napi::Env env, Napi::Function onRequest, Outgoing* data) {
  std::unique_ptr<Outgoing> owned(data);
  if (static_cast<napi_env>(env) == nullptr) return;  // the environment is going away: the relay ends with it
  try {
    onRequest.Call({Napi::Number::New(env, static_cast<double>(owned->id)), requestToJs(env, owned->request)});
  } catch (const std::exception& e) {
    if (auto relay = owned->relay.lock()) relay->reply(owned->id, {common::code::kNetwork, std::string("could not send the request: ") + e.what(), {}, 0});
  } catch (...) {
    if (auto relay = owned->relay.lock()) relay->reply(owned->id, {common::code::kNetwork, "could not send the request", {}, 0});
  }
}

void releaseAtTeardown(void* arg) { static_cast<RelaySender*>(arg)->release("the process is exiting"); }

void initStores(Napi::Env env, Napi::Object slice) {
  // storeLocal(timeoutMs) -> handle: a store in this process (the main node's)
  slice.Set("storeLocal", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      return Napi::Number::New(info.Env(), keep({RendezvousStore::local(info[0].As<Napi::Number>().Int64Value()), nullptr, nullptr}));
    });
  }));
  // storeRelay(timeoutMs, onRequest(id, request)) -> handle: a store whose calls JS carries to
  // another process; storeRelayReply hands back each answer
  slice.Set("storeRelay", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      Napi::Env env = info.Env();
      auto sender = std::make_shared<RelaySender>();
      sender->jsThread = std::this_thread::get_id();
      sender->tsfn = Napi::ThreadSafeFunction::New(env, info[1].As<Napi::Function>(), "dtorch-store-relay", 0, 1);
      sender->tsfn.Unref(env);  // the session it goes over keeps the process alive, not the relay
      auto relay = std::make_shared<StoreRelay>([sender](uint64_t id, const StoreRequest& request) {
        // the JS thread would wait for itself: its event loop carries the request
        if (std::this_thread::get_id() == sender->jsThread) throw common::DTorchError(common::code::kInternal, "a relayed store call on the JS thread");
        std::lock_guard<std::mutex> lock(sender->mutex);
        if (sender->released) throw common::DTorchError(common::code::kNetwork, "the relay was closed");
        auto* data = new Outgoing{id, request, sender->relay};
        if (sender->tsfn.NonBlockingCall(data, sendToJs) != napi_ok) {
          delete data;
          throw common::DTorchError(common::code::kNetwork, "the relay was closed");
        }
      });
      sender->relay = relay;
      auto store = RendezvousStore::relayed(relay, info[0].As<Napi::Number>().Int64Value());
      napi_add_env_cleanup_hook(env, releaseAtTeardown, sender.get());
      return Napi::Number::New(env, keep({store, sender, env}));
    });
  }));
  // storeRelayReply(handle, id, reply): the answer to a relayed store's request `id`
  slice.Set("storeRelayReply", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto relay = storeOf(info[0])->relay();
      if (!relay) throw common::DTorchError(common::code::kInvalidArgument, "rendezvous store: only a relayed store takes replies");
      relay->reply(static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value()), replyFromJs(info[2]));
      return info.Env().Undefined();
    });
  }));
  // storeAnswer(handle, origin, request) -> Promise<reply>: a local store runs node `origin`'s
  // relayed request (off the JS thread: gets and waits block); failures come back in the reply
  slice.Set("storeAnswer", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = storeOf(info[0]);
      const int origin = info[1].As<Napi::Number>().Int32Value();
      StoreRequest request = requestFromJs(info[2]);
      auto reply = std::make_shared<StoreReply>();
      return queue(info.Env(), [=] { *reply = store->answer(origin, request); }, [reply](Napi::Env e) -> Napi::Value { return replyToJs(e, *reply); });
    });
  }));
  // storeForget(handle, origin): node `origin`'s relayed waits end, its later requests fail
  slice.Set("storeForget", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      storeOf(info[0])->forget(info[1].As<Napi::Number>().Int32Value());
      return info.Env().Undefined();
    });
  }));
  // storeConnect(host, port, timeoutMs) -> Promise<handle>: a c10d TCPStore client
  slice.Set("storeConnect", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto result = std::make_shared<std::shared_ptr<RendezvousStore>>();
      std::string host = info[0].As<Napi::String>();
      const int port = info[1].As<Napi::Number>().Int32Value();
      const int64_t timeoutMs = info[2].As<Napi::Number>().Int64Value();
      return queue(info.Env(), [=] { *result = RendezvousStore::connect(host, port, timeoutMs); }, [result](Napi::Env e) -> Napi::Value {
        return Napi::Number::New(e, keep({*result, nullptr, nullptr}));
      });
    });
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
  // storeCheck(handle, keys) -> Promise<boolean>: whether every key is set, without waiting
  slice.Set("storeCheck", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto store = storeOf(info[0]);
      Napi::Array list = info[1].As<Napi::Array>();
      std::vector<std::string> keys;
      for (uint32_t i = 0; i < list.Length(); ++i) keys.push_back(list.Get(i).As<Napi::String>().Utf8Value());
      auto found = std::make_shared<bool>(false);
      return queue(info.Env(), [=] { *found = store->check(keys); }, [found](Napi::Env e) -> Napi::Value { return Napi::Boolean::New(e, *found); });
    });
  }));
  // storeClose(handle, why): ends its waits (a relayed store's calls fail with `why`); the store
  // itself goes once no queued call holds it
  slice.Set("storeClose", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto it = stores().find(info[0].As<Napi::Number>().Int32Value());
      if (it == stores().end()) return info.Env().Undefined();
      const std::string why = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : std::string("the store was closed");
      OpenStore open = std::move(it->second);
      stores().erase(it);
      open.store->close(why);
      if (open.sender) {
        napi_remove_env_cleanup_hook(open.env, releaseAtTeardown, open.sender.get());
        open.sender->release(why);
      }
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
  // the timed matmuls' counters, this process (all zero without CUDA or with tuning off)
  slice.Set("cudaMatmulTuningStats", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      const auto stats = external::cuda::matmulTuningStats();
      Napi::Object out = Napi::Object::New(info.Env());
      out.Set("shapes", static_cast<double>(stats.shapes));
      out.Set("candidates", static_cast<double>(stats.candidates));
      out.Set("tunedCalls", static_cast<double>(stats.tunedCalls));
      out.Set("heuristicCalls", static_cast<double>(stats.heuristicCalls));
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
