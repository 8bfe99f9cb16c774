#include "common/env.h"

#include <cstdlib>
#include <memory>

#include "common/error.h"

namespace dtorch::common {
namespace {

// setTimeout's bound, and more than any wait here needs (24.8 days)
constexpr int64_t kMaxMs = 2147483647;

// "Expected <what> for <name> but received <value> of type string", as check.ts words it.
[[noreturn]] void refuse(const char* name, const char* raw, const std::string& what) {
  fail(code::kInvalidArgument,
       "Expected " + what + " for environment variable " + name + " but received \"" + raw + "\" of type string");
}

bool unset(const char* raw) { return raw == nullptr || *raw == '\0'; }

// Decimal digits only: "1e3", "0x10", " 5" and "5ms" are refused rather than half-read.
int64_t integer(const char* name, const char* raw, int64_t min, int64_t max, int64_t fallback, const std::string& what) {
  if (unset(raw)) return fallback;
  int64_t value = 0;
  for (const char* c = raw; *c; ++c) {
    if (*c < '0' || *c > '9' || value > max) refuse(name, raw, what);
    value = value * 10 + (*c - '0');
  }
  if (value < min || value > max) refuse(name, raw, what);
  return value;
}

bool flag(const char* name, const char* raw, bool fallback) {
  if (unset(raw)) return fallback;
  const std::string v(raw);
  if (v == "1") return true;
  if (v == "0") return false;
  refuse(name, raw, "0 or 1");
}

}  // namespace

Settings parseSettings(const std::function<const char*(const char*)>& lookup) {
  Settings s;
  auto get = [&](const char* name) { return lookup(name); };
  s.cpuDevices = integer("DTORCH_CPU_DEVICES", get("DTORCH_CPU_DEVICES"), 1, 1024, s.cpuDevices, "integer from 1 to 1024");
  s.intraOpThreads = integer("DTORCH_INTRAOP_THREADS", get("DTORCH_INTRAOP_THREADS"), 1, 1024, s.intraOpThreads,
                             "integer from 1 to 1024 (unset: cores / CPU workers)");
  s.collectiveTimeoutMs = integer("DTORCH_COLLECTIVE_TIMEOUT_MS", get("DTORCH_COLLECTIVE_TIMEOUT_MS"), 1, kMaxMs,
                                  s.collectiveTimeoutMs, "integer of milliseconds from 1 to " + std::to_string(kMaxMs));
  s.cudaBatchesInFlight = integer("DTORCH_CUDA_BATCHES_IN_FLIGHT", get("DTORCH_CUDA_BATCHES_IN_FLIGHT"), 0, 1024,
                                  s.cudaBatchesInFlight, "integer from 0 to 1024");
  s.graphCopyLimitMb = integer("DTORCH_GRAPH_COPY_LIMIT_MB", get("DTORCH_GRAPH_COPY_LIMIT_MB"), 0, 65536, s.graphCopyLimitMb,
                               "integer of MiB from 0 to 65536");
  s.replaySegmentNodes = integer("DTORCH_REPLAY_SEGMENT_NODES", get("DTORCH_REPLAY_SEGMENT_NODES"), 1, 1000000,
                                 s.replaySegmentNodes, "integer from 1 to 1000000");
  s.replayHeadNodes = integer("DTORCH_REPLAY_HEAD_NODES", get("DTORCH_REPLAY_HEAD_NODES"), 0, 1000000, s.replayHeadNodes,
                              "integer from 0 (never) to 1000000");
  s.nccl = flag("DTORCH_NCCL", get("DTORCH_NCCL"), s.nccl);
  s.copyEngines = flag("DTORCH_COPY_ENGINES", get("DTORCH_COPY_ENGINES"), s.copyEngines);
  s.copyEngineReductions = flag("DTORCH_COPY_ENGINE_REDUCTIONS", get("DTORCH_COPY_ENGINE_REDUCTIONS"), s.copyEngineReductions);
  s.fusion = flag("DTORCH_FUSION", get("DTORCH_FUSION"), s.fusion);
  s.graphs = flag("DTORCH_GRAPHS", get("DTORCH_GRAPHS"), s.graphs);
  s.rmsNormKernel = flag("DTORCH_RMS_NORM_KERNEL", get("DTORCH_RMS_NORM_KERNEL"), s.rmsNormKernel);
  s.scalarOpKernel = flag("DTORCH_SCALAR_OP_KERNEL", get("DTORCH_SCALAR_OP_KERNEL"), s.scalarOpKernel);
  s.rotaryKernel = flag("DTORCH_ROTARY_KERNEL", get("DTORCH_ROTARY_KERNEL"), s.rotaryKernel);
  s.loraJoin = flag("DTORCH_LORA_JOIN", get("DTORCH_LORA_JOIN"), s.loraJoin);
  s.loraTall = flag("DTORCH_LORA_TALL", get("DTORCH_LORA_TALL"), s.loraTall);
  s.matmulTuning = flag("DTORCH_MATMUL_TUNING", get("DTORCH_MATMUL_TUNING"), s.matmulTuning);
  s.convChannelsLast = flag("DTORCH_CONV_CHANNELS_LAST", get("DTORCH_CONV_CHANNELS_LAST"), s.convChannelsLast);
  return s;
}

const Settings& settings() {
  // parsed once: a failure is kept and thrown again, never half-applied
  static const auto parsed = []() -> std::pair<std::unique_ptr<Settings>, std::unique_ptr<DTorchError>> {
    try {
      return {std::make_unique<Settings>(parseSettings([](const char* name) { return std::getenv(name); })), nullptr};
    } catch (const DTorchError& e) {
      return {nullptr, std::make_unique<DTorchError>(e)};
    }
  }();
  if (parsed.second) throw *parsed.second;
  return *parsed.first;
}

std::string envString(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

}  // namespace dtorch::common
