// @dtorch/core's cluster slice (core.cluster): joins this process's engine to a cluster as the
// main node or a worker, and moves the op stream's payloads between the engine and the JS side,
// which sends them over ZeroMQ (packages/external's op_stream.ts). The engine posts payloads to
// its outbox from any thread; one thread-safe function tells JS to take them.
#include <napi.h>

#include "bindings/binding_util.h"
#include "bindings/store_handles.h"
#include "common/error.h"
#include "core/cluster/stream_codec.h"
#include "core/runner/engine.h"

namespace dtorch::bindings {

core::Engine& engineOf(Napi::Env env);  // core_binding.cpp

namespace {

struct ClusterState {
  Napi::ThreadSafeFunction wake;  // calls the JS side's onOutgoing; unref'd while idle
  bool joined = false;
};

ClusterState& clusterState() {
  static ClusterState s;
  return s;
}

std::vector<core::ClusterDevice> devicesFromJs(const Napi::Value& value) {
  Napi::Array list = value.As<Napi::Array>();
  std::vector<core::ClusterDevice> out;
  for (uint32_t i = 0; i < list.Length(); ++i) {
    Napi::Object d = list.Get(i).As<Napi::Object>();
    const std::string kind = d.Get("kind").As<Napi::String>().Utf8Value();
    if (kind != "cpu" && kind != "cuda") common::fail(common::code::kInvalidArgument, "cluster device kind " + kind);
    core::ClusterDevice device;
    device.device = {kind == "cpu" ? core::DeviceKind::kCpu : core::DeviceKind::kCuda, d.Get("index").As<Napi::Number>().Int32Value()};
    device.node = d.Get("node").As<Napi::Number>().Int32Value();
    device.localIndex = d.Get("localIndex").As<Napi::Number>().Int32Value();
    if (device.device.index < 0 || device.node < 0 || device.localIndex < 0) common::fail(common::code::kInvalidArgument, "a negative cluster device number");
    out.push_back(device);
  }
  return out;
}

Napi::Buffer<char> toBuffer(Napi::Env env, std::string&& payload) {
  auto* held = new std::string(std::move(payload));
  return Napi::Buffer<char>::New(env, held->data(), held->size(), [](Napi::Env, char*, std::string* s) { delete s; }, held);
}

Napi::Array toBuffers(Napi::Env env, std::vector<std::string>&& payloads) {
  Napi::Array out = Napi::Array::New(env, payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) out.Set(static_cast<uint32_t>(i), toBuffer(env, std::move(payloads[i])));
  return out;
}

std::string_view bytesOf(const Napi::Value& value) {
  if (!value.IsBuffer()) common::fail(common::code::kInvalidArgument, "an op stream payload must be a Buffer");
  Napi::Buffer<char> b = value.As<Napi::Buffer<char>>();
  return {b.Data(), b.Length()};
}

// The wake's call of onOutgoing (unref'd, it may come in as the environment tears down).
void callOnOutgoing(Napi::Env, Napi::Function onOutgoing) {
  guardedCallback("a wake of the op stream", [&] { onOutgoing.Call({}); });
}

// join(node, epoch, storeHandle | undefined, devices, onOutgoing, glooHost)
Napi::Value join(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    ClusterState& s = clusterState();
    if (s.joined) common::fail(common::code::kInvalidArgument, "this process is in a cluster already");
    std::shared_ptr<external::torch::RendezvousStore> store = info[2].IsUndefined() ? nullptr : storeOfHandle(info[2]);
    core::Engine& engine = engineOf(env);
    engine.joinCluster(info[0].As<Napi::Number>().Int32Value(), static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value()),
                       std::move(store), devicesFromJs(info[3]), info[5].As<Napi::String>().Utf8Value());
    s.wake = Napi::ThreadSafeFunction::New(env, info[4].As<Napi::Function>(), "dtorch-op-stream", 0, 1);
    s.wake.Unref(env);
    Napi::ThreadSafeFunction wake = s.wake;
    engine.outbox().setNotify([wake]() mutable { wake.NonBlockingCall(callOnOutgoing); });
    s.joined = true;
    return env.Undefined();
  });
}

// takeOutgoing() -> Buffer[]: the payloads posted since the last call, in order.
Napi::Value takeOutgoing(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    return toBuffers(info.Env(), engineOf(info.Env()).outbox().takeAll());
  });
}

// addDevices(devices): the main node's view grows by a worker's devices.
Napi::Value addDevices(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engineOf(info.Env()).addClusterDevices(devicesFromJs(info[0]));
    return info.Env().Undefined();
  });
}

// snapshot() -> Buffer[]: what a worker that joins now gets first.
Napi::Value snapshot(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    return toBuffers(info.Env(), engineOf(info.Env()).clusterSnapshot());
  });
}

// apply(payload): a worker applies one payload of the main node (throws PROTOCOL_ERROR).
Napi::Value apply(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engineOf(info.Env()).applyStreamed(bytesOf(info[0]));
    return info.Env().Undefined();
  });
}

// answer(node, payload): the main node takes a worker's answer (throws PROTOCOL_ERROR).
Napi::Value answer(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engineOf(info.Env()).answerFrom(info[0].As<Napi::Number>().Int32Value(), bytesOf(info[1]));
    return info.Env().Undefined();
  });
}

// nodeLost(node, message)
Napi::Value nodeLost(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engineOf(info.Env()).nodeLost(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::String>().Utf8Value());
    return info.Env().Undefined();
  });
}

// leave(message): back to a process of its own; waits on other nodes fail with `message`.
Napi::Value leave(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    ClusterState& s = clusterState();
    if (!s.joined) return env.Undefined();
    core::Engine& engine = engineOf(env);
    engine.outbox().setNotify(nullptr);
    engine.leaveCluster(info[0].As<Napi::String>().Utf8Value());
    s.wake.Release();
    s.joined = false;
    return env.Undefined();
  });
}

// decode(payload) -> { type, nodes }: checks a payload without applying it (the fuzz tests).
Napi::Value decode(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    const core::stream::Message m = core::stream::decode(bytesOf(info[0]));
    Napi::Object out = Napi::Object::New(env);
    out.Set("type", static_cast<int>(m.type));
    out.Set("nodes", static_cast<double>(m.nodes.size()));
    return out;
  });
}

// stats() -> { remoteWaits }: what the main node waits for (tests).
Napi::Value stats(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("remoteWaits", static_cast<double>(engineOf(info.Env()).remoteWaits()));
    return out;
  });
}

}  // namespace

Napi::Object initCluster(Napi::Env env) {
  Napi::Object slice = Napi::Object::New(env);
  slice.Set("join", Napi::Function::New(env, join));
  slice.Set("takeOutgoing", Napi::Function::New(env, takeOutgoing));
  slice.Set("addDevices", Napi::Function::New(env, addDevices));
  slice.Set("snapshot", Napi::Function::New(env, snapshot));
  slice.Set("apply", Napi::Function::New(env, apply));
  slice.Set("answer", Napi::Function::New(env, answer));
  slice.Set("nodeLost", Napi::Function::New(env, nodeLost));
  slice.Set("leave", Napi::Function::New(env, leave));
  slice.Set("decode", Napi::Function::New(env, decode));
  slice.Set("stats", Napi::Function::New(env, stats));
  return slice;
}

}  // namespace dtorch::bindings
