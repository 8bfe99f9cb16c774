// @dtorch/core's slice: the engine. Op calls pass their arguments through a shared
// Float64Array (`args`) and get output metadata back through another (`out`), so a record
// costs one N-API call with three small integers. Both grow on demand (growArgs; a record whose
// outputs need more room returns the grown `out`), so no op is limited by their size. Reads
// resolve promises through one thread-safe function, never by polling.
#include <napi.h>

#include <ATen/ATen.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "bindings/binding_util.h"
#include "common/env.h"
#include "common/error.h"
#include "common/format.h"
#include "core/communication/redistribute_plan.h"
#include "core/communication/rendezvous.h"
#include "core/operand/layout.h"
#include "core/operators/op.h"
#include "core/operators/registry.h"
#include "core/program/completion.h"
#include "core/runner/engine.h"

namespace dtorch::bindings {
namespace {

using core::Completion;
using core::FetchResult;

constexpr size_t kArgCapacity = 1 << 16;
constexpr size_t kOutCapacity = 1 << 12;

// Doubles shared with JS as a Float64Array over native memory. Growing moves them to new
// storage; the old storage stays until the engine goes, so that a stale JS view can never write
// into freed memory.
class SharedBuffer {
 public:
  explicit SharedBuffer(size_t capacity) { storage_.emplace_back(capacity); }
  double* data() { return storage_.back().data(); }
  size_t capacity() const { return storage_.back().size(); }
  // Room for `n` values, the contents kept; true when the storage moved (JS needs the new view).
  bool reserve(size_t n) {
    if (n <= capacity()) return false;
    std::vector<double> grown(std::max(n, 2 * capacity()));
    std::copy(storage_.back().begin(), storage_.back().end(), grown.begin());
    storage_.push_back(std::move(grown));
    return true;
  }
  Napi::Float64Array view(Napi::Env env) {
    return Napi::Float64Array::New(env, capacity(), Napi::ArrayBuffer::New(env, data(), capacity() * sizeof(double)), 0);
  }

 private:
  std::deque<std::vector<double>> storage_;
};

struct Delivery {
  uint64_t readId;
  FetchResult result;
};

struct CoreState;
void onDelivery(Napi::Env env, Napi::Function, CoreState* state, Delivery* delivery);
using DeliveryFn = Napi::TypedThreadSafeFunction<CoreState, Delivery, onDelivery>;

struct CoreState {
  std::unique_ptr<core::Engine> engine = std::make_unique<core::Engine>();
  SharedBuffer args{kArgCapacity};
  SharedBuffer out{kOutCapacity};
  DeliveryFn deliveries;
  std::unordered_map<uint64_t, Napi::Promise::Deferred> pending;  // JS thread only
  uint64_t nextReadId = 1;
  bool closed = false;
};

CoreState& state(Napi::Env env) { return *static_cast<CoreState*>(addonData(env).core.get()); }

core::Engine& engine(Napi::Env env) {
  CoreState& s = state(env);
  if (s.closed) common::fail(common::code::kShutdown, "the engine has shut down (the Node environment is exiting)");
  return *s.engine;
}

// ---- values crossing to JS ---------------------------------------------------------------

Napi::Value fetchedToJs(Napi::Env env, FetchResult& r) {
  Napi::Object obj = Napi::Object::New(env);
  obj.Set("dtype", static_cast<int>(r.dtype));
  if (!r.host.defined() || r.host.nbytes() == 0) {
    obj.Set("buffer", Napi::ArrayBuffer::New(env, 0));
    return obj;
  }
  // zero copy: the ArrayBuffer keeps the host tensor alive until JS lets go of it
  auto* holder = new at::Tensor(std::move(r.host));
  obj.Set("buffer", Napi::ArrayBuffer::New(
                        env, holder->data_ptr(), holder->nbytes(),
                        [](Napi::Env, void*, at::Tensor* h) { delete h; }, holder));
  return obj;
}

Napi::Error failureToJs(Napi::Env env, const FetchResult& r) {
  std::string message = r.op.empty() ? r.message : r.op + " failed: " + r.message;
  Napi::Error err = makeError(env, r.code, message);
  if (!r.op.empty()) err.Set("op", r.op);
  if (r.seq) err.Set("seq", static_cast<double>(r.seq));
  return err;
}

void onDelivery(Napi::Env env, Napi::Function, CoreState* s, Delivery* delivery) {
  std::unique_ptr<Delivery> owned(delivery);
  if (env == nullptr || s == nullptr) return;  // environment tearing down
  auto it = s->pending.find(owned->readId);
  if (it == s->pending.end()) return;
  Napi::Promise::Deferred deferred = it->second;
  s->pending.erase(it);
  // a read that comes in while the environment tears down (done by the engine's stop on 'exit')
  // settles nothing: JS cannot run any more
  guardedCallback("a read's result", [&] {
    if (s->pending.empty()) s->deliveries.Unref(env);
    Napi::HandleScope scope(env);
    if (owned->result.ok) deferred.Resolve(fetchedToJs(env, owned->result));
    else deferred.Reject(failureToJs(env, owned->result).Value());
  });
}

// A completion whose result resolves a promise on the JS thread. `recordRead(completion)`
// records the read; when it throws, the promise is forgotten again (the caller gets the error),
// so that no pending read keeps Node alive.
template <typename RecordRead>
Napi::Promise promiseCompletion(Napi::Env env, RecordRead&& recordRead) {
  CoreState& s = state(env);
  const uint64_t readId = s.nextReadId++;
  auto deferred = Napi::Promise::Deferred::New(env);
  if (s.pending.empty()) s.deliveries.Ref(env);  // keep Node alive while a read is out
  s.pending.emplace(readId, deferred);
  DeliveryFn fn = s.deliveries;
  auto completion = std::make_shared<Completion>();
  completion->deliver = [fn, readId](FetchResult&& result) mutable {
    fn.BlockingCall(new Delivery{readId, std::move(result)});
  };
  try {
    recordRead(std::move(completion));
  } catch (...) {
    s.pending.erase(readId);
    if (s.pending.empty()) s.deliveries.Unref(env);
    throw;
  }
  return deferred.Promise();
}

// ---- op recording --------------------------------------------------------------------------

// Writes [seq, nOut, per output: id, dtype, ndim, shape..., nPlacements, placements...] to
// `out`, growing it on the way when the outputs need more room; returns the grown view for JS
// then, else undefined. Should even growing fail, the outputs are released: the call records
// nothing.
Napi::Value writeRecorded(Napi::Env env, CoreState& s, const core::Recorder::Recorded& rec) {
  core::Recorder& recorder = s.engine->recorder();
  bool grew = false;
  double* out = s.out.data();
  size_t i = 0;
  out[i++] = static_cast<double>(rec.seq);
  out[i++] = static_cast<double>(rec.outputs.size());
  for (int64_t id : rec.outputs) {
    const core::TensorMeta& m = recorder.meta(id);
    const size_t end = i + 4 + m.shape.size() + m.placements.size();
    if (end > s.out.capacity()) {  // many outputs (unbind of 1,000 rows): what was written moves along
      try {
        s.out.reserve(end);
      } catch (...) {
        for (int64_t recorded : rec.outputs) recorder.release(recorded);
        throw;
      }
      out = s.out.data();
      grew = true;
    }
    out[i++] = static_cast<double>(id);
    out[i++] = static_cast<double>(static_cast<int>(m.dtype));
    out[i++] = static_cast<double>(m.shape.size());
    for (int64_t d : m.shape) out[i++] = static_cast<double>(d);
    out[i++] = static_cast<double>(m.placements.size());
    for (const core::Placement& p : m.placements) out[i++] = p.encode();
  }
  return grew ? Napi::Value(s.out.view(env)) : env.Undefined();
}

// The JS side makes room (Engine.reserveArgs) before it writes; more values than `args` holds
// means writes were lost, an engine bug, refused before anything is recorded.
void checkArgCounts(const CoreState& s, size_t nInputs, size_t nAttrs) {
  if (nInputs + nAttrs > s.args.capacity()) {
    common::fail(common::code::kInternal, std::to_string(nInputs + nAttrs) + " op arguments but the args buffer holds " +
                                              std::to_string(s.args.capacity()) + " (an engine bug: please report it)");
  }
}

Napi::Value record(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    CoreState& s = state(info.Env());
    const int code = info[0].As<Napi::Number>().Int32Value();
    const size_t nInputs = info[1].As<Napi::Number>().Uint32Value();
    const size_t nAttrs = info[2].As<Napi::Number>().Uint32Value();
    checkArgCounts(s, nInputs, nAttrs);
    const double* args = s.args.data();
    c10::SmallVector<int64_t, 4> inputs;
    for (size_t i = 0; i < nInputs; ++i) inputs.push_back(static_cast<int64_t>(args[i]));
    const auto& op = core::OpRegistry::instance().byCode(code);
    return writeRecorded(info.Env(), s, e.recorder().record(op, inputs, c10::ArrayRef<double>(args + nInputs, nAttrs)));
  });
}

// recordData(opCode, nAttrs, typedArray, sourceDtype): like record for "from_data"; the
// typed array's elements (of sourceDtype) are copied now and converted to the target dtype.
Napi::Value recordData(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    CoreState& s = state(info.Env());
    const int code = info[0].As<Napi::Number>().Int32Value();
    const size_t nAttrs = info[1].As<Napi::Number>().Uint32Value();
    checkArgCounts(s, 0, nAttrs);
    Napi::TypedArray array = info[2].As<Napi::TypedArray>();
    const core::DType source = core::dtypeFromCode(info[3].As<Napi::Number>().Int32Value());
    const auto* bytes = static_cast<const uint8_t*>(array.ArrayBuffer().Data()) + array.ByteOffset();
    const auto& op = core::OpRegistry::instance().byCode(code);
    return writeRecorded(info.Env(), s, e.recorder().recordHostData(op, c10::ArrayRef<double>(s.args.data(), nAttrs), bytes, array.ByteLength(), source));
  });
}

// Placement codes from JS (Placement.code()) as placements.
core::Placements placementsFrom(const Napi::Array& codes) {
  core::Placements placements;
  for (uint32_t i = 0; i < codes.Length(); ++i) placements.push_back(core::Placement::decode(codes.Get(i).As<Napi::Number>().Int32Value()));
  return placements;
}

// redistribute(id, meshId, placementCodes[]): like record, output metadata in `out`.
Napi::Value redistribute(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    const auto id = static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value());
    const int meshId = info[1].As<Napi::Number>().Int32Value();
    return writeRecorded(info.Env(), state(info.Env()), e.recorder().redistribute(id, meshId, placementsFrom(info[2].As<Napi::Array>())));
  });
}

// planRedistribute(id, placementCodes[]) -> step descriptions, for explaining a redistribute.
Napi::Value planRedistribute(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    core::Engine& e = engine(env);
    const core::TensorMeta& m = e.recorder().meta(static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value()));
    const auto steps = core::planRedistribute(e.meshes().get(m.meshId), m.placements, placementsFrom(info[1].As<Napi::Array>()));
    Napi::Array out = Napi::Array::New(env, steps.size());
    for (uint32_t i = 0; i < steps.size(); ++i) out.Set(i, steps[i].describe());
    return out;
  });
}

// signatureRows(opCode, nInputs, nAttrs) -> [{ inputs: codes[], output: code, slice: mask }]:
// the op's placement rows for these inputs and attributes (written to `args` as for record),
// for tests that run every legal row. Records nothing.
Napi::Value signatureRows(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    core::Engine& e = engine(env);
    CoreState& s = state(env);
    const auto& op = core::OpRegistry::instance().byCode(info[0].As<Napi::Number>().Int32Value());
    const size_t nInputs = info[1].As<Napi::Number>().Uint32Value(), nAttrs = info[2].As<Napi::Number>().Uint32Value();
    checkArgCounts(s, nInputs, nAttrs);
    const double* args = s.args.data();
    c10::SmallVector<int64_t, 4> inputs;
    for (size_t i = 0; i < nInputs; ++i) inputs.push_back(static_cast<int64_t>(args[i]));
    const core::SignatureRows rows = e.recorder().signatureRows(op, inputs, c10::ArrayRef<double>(args + nInputs, nAttrs));
    Napi::Array out = Napi::Array::New(env, rows.size());
    for (uint32_t r = 0; r < rows.size(); ++r) {
      Napi::Object entry = Napi::Object::New(env);
      Napi::Array inputs = Napi::Array::New(env, rows[r].inputs.size());
      for (uint32_t k = 0; k < rows[r].inputs.size(); ++k) inputs.Set(k, rows[r].inputs[k].encode());
      entry.Set("inputs", inputs);
      entry.Set("output", rows[r].output.encode());
      entry.Set("slice", rows[r].localSliceMask);
      out.Set(r, entry);
    }
    return out;
  });
}

// layout(id) -> [{ device, shape, offset }] per rank: where each piece of the tensor lives.
Napi::Value layout(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    core::Engine& e = engine(env);
    const core::TensorMeta& m = e.recorder().meta(static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value()));
    const core::DeviceMesh& mesh = e.meshes().get(m.meshId);
    Napi::Array out = Napi::Array::New(env);
    auto toArray = [&](const core::Shape& s) {
      Napi::Array a = Napi::Array::New(env, s.size());
      for (uint32_t i = 0; i < s.size(); ++i) a.Set(i, static_cast<double>(s[i]));
      return a;
    };
    for (int rank = 0; rank < mesh.size(); ++rank) {
      const core::LocalPiece piece = core::localPiece(m.shape, m.placements, mesh, rank);
      Napi::Object entry = Napi::Object::New(env);
      entry.Set("device", mesh.device(rank).name());
      entry.Set("shape", toArray(piece.shape));
      entry.Set("offset", toArray(piece.offset));
      out.Set(rank, entry);
    }
    return out;
  });
}

// growArgs(n) -> the `args` view with room for n values (the values written so far kept).
Napi::Value growArgs(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    CoreState& s = state(info.Env());
    const double n = info[0].As<Napi::Number>().DoubleValue();
    if (!(n >= 0 && n <= 1e9)) common::fail(common::code::kInvalidArgument, "growArgs: " + std::to_string(n) + " values");
    s.args.reserve(static_cast<size_t>(n));
    return s.args.view(info.Env());
  });
}

Napi::Value release(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {  // called by FinalizationRegistry too: nothing may escape
    CoreState& s = state(info.Env());
    if (!s.closed) s.engine->recorder().release(static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value()));
    return info.Env().Undefined();
  });
}

Napi::Value flush(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().flush();
    return info.Env().Undefined();
  });
}

// ---- reads ----------------------------------------------------------------------------------

Napi::Value fetch(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    const auto id = static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value());
    e.recorder().meta(id);  // a disposed tensor throws here, at the caller's line
    return promiseCompletion(info.Env(), [&](std::shared_ptr<Completion> completion) { e.fetch(id, std::move(completion)); });
  });
}

// fetchSync(id, timeoutMs): blocks the JS thread until the value arrives or the time is up.
Napi::Value fetchSync(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    const auto id = static_cast<int64_t>(info[0].As<Napi::Number>().Int64Value());
    const double timeoutMs = info[1].As<Napi::Number>().DoubleValue();
    if (e.answeredElsewhere(id)) {  // its answer arrives through this very thread's event loop
      common::fail(common::code::kInvalidArgument, "dataSync: tensor " + std::to_string(id) +
                                                       " is read from another node of the cluster, whose answer comes through the event "
                                                       "loop this call would block; use await data()");
    }
    struct Waiter {
      std::mutex mutex;
      std::condition_variable cv;
      bool done = false;
      FetchResult result;
    };
    auto waiter = std::make_shared<Waiter>();
    auto completion = std::make_shared<Completion>();
    completion->deliver = [waiter](FetchResult&& result) {
      {
        std::lock_guard<std::mutex> lock(waiter->mutex);
        waiter->result = std::move(result);
        waiter->done = true;
      }
      waiter->cv.notify_one();
    };
    e.fetch(id, completion);
    std::unique_lock<std::mutex> lock(waiter->mutex);
    if (!waiter->cv.wait_for(lock, std::chrono::duration<double, std::milli>(timeoutMs), [&] { return waiter->done; })) {
      common::fail(common::code::kTimeout, "dataSync: the value did not arrive within " + std::to_string(timeoutMs) +
                                               " ms; use await data() for long work, or raise DTORCH_READ_TIMEOUT_MS");
    }
    if (!waiter->result.ok) throw failureToJs(info.Env(), waiter->result);
    return fetchedToJs(info.Env(), waiter->result);
  });
}

Napi::Value sync(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    core::Engine& e = engine(info.Env());
    return promiseCompletion(info.Env(), [&](std::shared_ptr<Completion> completion) { e.sync(std::move(completion)); });
  });
}

// ---- meshes, ops, memory --------------------------------------------------------------------

// createMesh(kind, devices: number[], shape: number[]) -> mesh id
Napi::Value createMesh(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const int kind = info[0].As<Napi::Number>().Int32Value();
    Napi::Array devices = info[1].As<Napi::Array>(), shape = info[2].As<Napi::Array>();
    std::vector<int> devs;
    std::vector<int64_t> dims;
    for (uint32_t i = 0; i < devices.Length(); ++i) devs.push_back(devices.Get(i).As<Napi::Number>().Int32Value());
    for (uint32_t i = 0; i < shape.Length(); ++i) dims.push_back(shape.Get(i).As<Napi::Number>().Int64Value());
    const auto& mesh = engine(info.Env()).createMesh(static_cast<core::DeviceKind>(kind), std::move(devs), std::move(dims));
    return Napi::Number::New(info.Env(), mesh.id);
  });
}

// The op table, by name: { add: { code, numInputs, attrs }, ... }
Napi::Value ops(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto& registry = core::OpRegistry::instance();
  Napi::Object table = Napi::Object::New(env);
  for (const core::OpDef& op : registry.ops()) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("code", registry.codeOf(op));
    entry.Set("numInputs", op.numInputs);
    entry.Set("attrs", std::string(op.attrs));
    table.Set(std::string(op.name), entry);
  }
  return table;
}

// The engine's error codes (native/common/error.h), as DTorchError.code carries them.
Napi::Value errorCodes(const Napi::CallbackInfo& info) {
  Napi::Array codes = Napi::Array::New(info.Env());
  uint32_t i = 0;
  for (const char* code : common::code::kAll) codes.Set(i++, std::string(code));
  return codes;
}

// The dtype table, by name: { float32: code, ... }
Napi::Value dtypes(const Napi::CallbackInfo& info) {
  Napi::Object table = Napi::Object::New(info.Env());
  for (core::DType d : core::kSupportedDtypes) table.Set(std::string(core::dtypeName(d)), static_cast<int>(d));
  return table;
}

Napi::Value memory(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    core::Engine& e = engine(env);
    const core::MemoryStats stats = e.recorder().memory();
    const auto workers = e.workers();
    Napi::Object out = Napi::Object::New(env);
    out.Set("numTensors", static_cast<double>(stats.numTensors));
    out.Set("numBytes", static_cast<double>(stats.numBytes));
    Napi::Array perDevice = Napi::Array::New(env);
    uint32_t i = 0;
    for (const core::WorkerInfo& w : workers) {
      Napi::Object entry = Napi::Object::New(env);
      entry.Set("device", w.device.name());
      int64_t tensors = 0, bytes = 0;
      for (const core::DeviceMemory& d : stats.perDevice) {
        if (d.device == w.device) tensors = d.numTensors, bytes = d.numBytes;
      }
      entry.Set("numTensors", static_cast<double>(tensors));
      entry.Set("numBytes", static_cast<double>(bytes));
      entry.Set("allocatedBytes", static_cast<double>(w.allocatedBytes));
      entry.Set("peakBytes", static_cast<double>(w.peakBytes));
      entry.Set("graphBytes", static_cast<double>(w.graphBytes));
      perDevice.Set(i++, entry);
    }
    out.Set("perDevice", perDevice);
    return out;
  });
}

// workers() -> [{ device, intraOpThreads }]
Napi::Value workers(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    Napi::Array list = Napi::Array::New(env);
    uint32_t i = 0;
    for (const core::WorkerInfo& w : engine(env).workers()) {
      Napi::Object entry = Napi::Object::New(env);
      entry.Set("device", w.device.name());
      entry.Set("intraOpThreads", w.intraOpThreads);
      entry.Set("kernelsRun", static_cast<double>(w.kernelsRun));
      list.Set(i++, entry);
    }
    return list;
  });
}

// graphStats() -> what the controller recognised of the segments it lowered (dt.graph.stats)
Napi::Value graphStats(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const core::RepeatStats s = engine(info.Env()).repeatStats();
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("segments", static_cast<double>(s.segments));
    out.Set("nodes", static_cast<double>(s.nodes));
    out.Set("repeats", static_cast<double>(s.repeats));
    out.Set("repeatedNodes", static_cast<double>(s.repeatedNodes));
    out.Set("distinct", static_cast<double>(s.distinct));
    out.Set("reusedLowerings", static_cast<double>(s.reusedLowerings));
    int64_t captured = 0, replays = 0, replayedKernels = 0, fallbacks = 0, bytes = 0, live = 0;
    for (const core::WorkerInfo& w : engine(info.Env()).workers()) {
      captured += w.graphsCaptured, replays += w.graphReplays, replayedKernels += w.graphReplayedKernels;
      fallbacks += w.graphFallbacks, bytes += w.graphBytes, live += w.graphsLive;
    }
    out.Set("captured", static_cast<double>(captured));
    out.Set("replays", static_cast<double>(replays));
    out.Set("replayedKernels", static_cast<double>(replayedKernels));
    out.Set("fallbacks", static_cast<double>(fallbacks));
    out.Set("graphBytes", static_cast<double>(bytes));
    out.Set("liveGraphs", static_cast<double>(live));
    out.Set("enabled", engine(info.Env()).graphs());
    return out;
  });
}

// setGraphs(on): recognising and replaying repeated segments on or off (dt.graph.setEnabled)
Napi::Value setGraphs(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).setGraphs(info[0].ToBoolean().Value());
    return info.Env().Undefined();
  });
}

// beginCall(): the start of a top-level model call (dt.graph.beginCall, Module.call)
Napi::Value beginCall(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().beginCall();
    return info.Env().Undefined();
  });
}

// beginStep(): the start or end of a step of a loop (dt.graph.step)
Napi::Value beginStep(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().beginStep();
    return info.Env().Undefined();
  });
}

// ---- compiled calls (dt.graph.compile; core/graph/call_trace.h) ------------------------------

// Ids written to `args` from `at`, `n` of them.
c10::SmallVector<int64_t, 8> idsFromArgs(CoreState& s, size_t at, size_t n) {
  checkArgCounts(s, at + n, 0);
  c10::SmallVector<int64_t, 8> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(s.args.data()[at + i]));
  return ids;
}

// beginTrace(): keeps what is recorded from now on, for endTrace
Napi::Value beginTrace(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().beginTrace();
    return info.Env().Undefined();
  });
}

// endTrace(nArguments, nOutputs): the call's argument ids then its output ids are in `args`;
// returns the trace's id, or a string saying why the call cannot be replayed by copying
Napi::Value endTrace(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    CoreState& s = state(info.Env());
    const size_t nArguments = info[0].As<Napi::Number>().Uint32Value();
    const size_t nOutputs = info[1].As<Napi::Number>().Uint32Value();
    const auto arguments = idsFromArgs(s, 0, nArguments);
    const auto outputs = idsFromArgs(s, nArguments, nOutputs);
    std::string why;
    const int64_t id = s.engine->recorder().endTrace(arguments, outputs, why);
    if (id == 0) return Napi::String::New(info.Env(), why);
    return Napi::Number::New(info.Env(), static_cast<double>(id));
  });
}

// abortTrace(): drops the open trace (the call threw)
Napi::Value abortTrace(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().abortTrace();
    return info.Env().Undefined();
  });
}

// replayTrace(traceId, nArguments): records the trace again on the argument ids in `args`;
// false when it does not fit them (nothing recorded), else true with args = [first seq, n,
// output ids...] (the JS side made room for them)
Napi::Value replayTrace(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    CoreState& s = state(info.Env());
    const int64_t traceId = info[0].As<Napi::Number>().Int64Value();
    const auto arguments = idsFromArgs(s, 0, info[1].As<Napi::Number>().Uint32Value());
    core::Recorder::Recorded recorded;
    core::Recorder& recorder = s.engine->recorder();
    if (!recorder.replayTrace(traceId, arguments, recorded)) return Napi::Boolean::New(info.Env(), false);
    if (2 + recorded.outputs.size() > s.args.capacity()) {
      for (int64_t id : recorded.outputs) recorder.release(id);
      checkArgCounts(s, 2 + recorded.outputs.size(), 0);
    }
    double* out = s.args.data();
    out[0] = static_cast<double>(recorded.seq);
    out[1] = static_cast<double>(recorded.outputs.size());
    for (size_t k = 0; k < recorded.outputs.size(); ++k) out[2 + k] = static_cast<double>(recorded.outputs[k]);
    return Napi::Boolean::New(info.Env(), true);
  });
}

// dropTrace(traceId): forgets a trace (its compiled function was collected)
Napi::Value dropTrace(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    CoreState& s = state(info.Env());
    if (!s.closed) s.engine->recorder().dropTrace(info[0].As<Napi::Number>().Int64Value());
    return info.Env().Undefined();
  });
}

Napi::Value resetPeakMemory(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).resetPeakMemory();
    return info.Env().Undefined();
  });
}

Napi::Value setFlushThreshold(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().setFlushThreshold(info[0].As<Napi::Number>().Int64Value());
    return info.Env().Undefined();
  });
}

// ---- settings ---------------------------------------------------------------------------------

Napi::Object settingsToJs(Napi::Env env, const common::Settings& s) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("cpuDevices", static_cast<double>(s.cpuDevices));
  out.Set("intraOpThreads", static_cast<double>(s.intraOpThreads));
  out.Set("collectiveTimeoutMs", static_cast<double>(s.collectiveTimeoutMs));
  out.Set("cudaBatchesInFlight", static_cast<double>(s.cudaBatchesInFlight));
  out.Set("graphCopyLimitMb", static_cast<double>(s.graphCopyLimitMb));
  out.Set("replaySegmentNodes", static_cast<double>(s.replaySegmentNodes));
  out.Set("replayHeadNodes", static_cast<double>(s.replayHeadNodes));
  out.Set("nccl", s.nccl);
  out.Set("copyEngines", s.copyEngines);
  out.Set("copyEngineReductions", s.copyEngineReductions);
  out.Set("fusion", s.fusion);
  out.Set("graphs", s.graphs);
  out.Set("rmsNormKernel", s.rmsNormKernel);
  out.Set("scalarOpKernel", s.scalarOpKernel);
  out.Set("rotaryKernel", s.rotaryKernel);
  out.Set("loraJoin", s.loraJoin);
  out.Set("loraTall", s.loraTall);
  out.Set("matmulTuning", s.matmulTuning);
  out.Set("convChannelsLast", s.convChannelsLast);
  return out;
}

// settings() -> the engine's settings of this process; throws INVALID_ARGUMENT for a malformed one.
Napi::Value settings(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value { return settingsToJs(info.Env(), common::settings()); });
}

// settingsFrom({ NAME: value }) -> the settings that environment would give (tests).
Napi::Value settingsFrom(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Object vars = info[0].As<Napi::Object>();
    std::unordered_map<std::string, std::string> values;
    Napi::Array names = vars.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      const std::string name = names.Get(i).ToString().Utf8Value();
      values[name] = vars.Get(name).ToString().Utf8Value();
    }
    return settingsToJs(info.Env(), common::parseSettings([&](const char* name) -> const char* {
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    }));
  });
}

// setCollectiveTimeout(ms): the bound of the collective waits that start from now on; 0 goes
// back to DTORCH_COLLECTIVE_TIMEOUT_MS.
Napi::Value setCollectiveTimeout(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const double ms = info[0].As<Napi::Number>().DoubleValue();
    if (!(ms >= 0 && ms <= 2147483647) || ms != static_cast<double>(static_cast<int64_t>(ms))) {
      common::fail(common::code::kInvalidArgument,
                   "Expected integer of milliseconds from 0 to 2147483647 for collective timeout but received " + std::to_string(ms) + " of type number");
    }
    core::setCollectiveTimeout(std::chrono::milliseconds(static_cast<int64_t>(ms)));
    return info.Env().Undefined();
  });
}

// failNextFlush(message): the next hand-over of a segment fails (tests of flush failures).
Napi::Value failNextFlush(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    engine(info.Env()).recorder().failNextFlush(info[0].As<Napi::String>().Utf8Value());
    return info.Env().Undefined();
  });
}

// shutdown(): stops the engine now (flushes, then stops the controller and the workers, each
// waiting for its GPU and freeing its tensors). The client calls it on process 'exit', while the
// CUDA runtime is still up: process.exit() goes on to C's exit(), whose static destructors would
// otherwise tear the CUDA allocator down under workers that still hold GPU memory.
Napi::Value shutdownNow(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    CoreState& s = state(info.Env());
    if (!s.closed) {
      s.closed = true;  // what the program records after this fails with SHUTDOWN instead of waiting forever
      s.engine->shutdown();
    }
    return info.Env().Undefined();
  });
}

void shutdownEnv(void* arg) {
  auto* s = static_cast<CoreState*>(arg);
  s->closed = true;
  try {  // no JS call on the stack: an exception here would end the process
    s->engine->shutdown();
  } catch (...) {
    logDropped("the engine's stop at teardown");
  }
  s->deliveries.Release();
}

}  // namespace

core::Engine& engineOf(Napi::Env env) { return engine(env); }
Napi::Object initCluster(Napi::Env env);  // cluster_binding.cpp

Napi::Object initCore(Napi::Env env) {
  auto s = std::make_shared<CoreState>();
  addonData(env).core = s;
  s->deliveries = DeliveryFn::New(env, "dtorch-deliveries", 0, 1, s.get());
  s->deliveries.Unref(env);
  napi_add_env_cleanup_hook(env, shutdownEnv, s.get());

  Napi::Object slice = Napi::Object::New(env);
  slice.Set("args", s->args.view(env));
  slice.Set("out", s->out.view(env));
  slice.Set("growArgs", Napi::Function::New(env, growArgs));
  slice.Set("record", Napi::Function::New(env, record));
  slice.Set("recordData", Napi::Function::New(env, recordData));
  slice.Set("release", Napi::Function::New(env, release));
  slice.Set("redistribute", Napi::Function::New(env, redistribute));
  slice.Set("layout", Napi::Function::New(env, layout));
  slice.Set("planRedistribute", Napi::Function::New(env, planRedistribute));
  slice.Set("signatureRows", Napi::Function::New(env, signatureRows));
  slice.Set("flush", Napi::Function::New(env, flush));
  slice.Set("fetch", Napi::Function::New(env, fetch));
  slice.Set("fetchSync", Napi::Function::New(env, fetchSync));
  slice.Set("sync", Napi::Function::New(env, sync));
  slice.Set("createMesh", Napi::Function::New(env, createMesh));
  slice.Set("ops", Napi::Function::New(env, ops));
  slice.Set("errorCodes", Napi::Function::New(env, errorCodes));
  slice.Set("dtypes", Napi::Function::New(env, dtypes));
  slice.Set("memory", Napi::Function::New(env, memory));
  slice.Set("workers", Napi::Function::New(env, workers));
  slice.Set("resetPeakMemory", Napi::Function::New(env, resetPeakMemory));
  slice.Set("graphStats", Napi::Function::New(env, graphStats));
  slice.Set("setGraphs", Napi::Function::New(env, setGraphs));
  slice.Set("beginStep", Napi::Function::New(env, beginStep));
  slice.Set("beginCall", Napi::Function::New(env, beginCall));
  slice.Set("beginTrace", Napi::Function::New(env, beginTrace));
  slice.Set("endTrace", Napi::Function::New(env, endTrace));
  slice.Set("abortTrace", Napi::Function::New(env, abortTrace));
  slice.Set("replayTrace", Napi::Function::New(env, replayTrace));
  slice.Set("dropTrace", Napi::Function::New(env, dropTrace));
  slice.Set("setFlushThreshold", Napi::Function::New(env, setFlushThreshold));
  slice.Set("settings", Napi::Function::New(env, settings));
  slice.Set("settingsFrom", Napi::Function::New(env, settingsFrom));
  slice.Set("setCollectiveTimeout", Napi::Function::New(env, setCollectiveTimeout));
  slice.Set("failNextFlush", Napi::Function::New(env, failNextFlush));
  slice.Set("shutdown", Napi::Function::New(env, shutdownNow));
  slice.Set("cluster", initCluster(env));
  return slice;
}

}  // namespace dtorch::bindings
