// The engine's settings from the environment, in one place. Each is checked when read: a value
// that cannot work (not a number, out of range, a switch other than 0/1) throws INVALID_ARGUMENT
// naming the variable, the value and what it must be, instead of quietly becoming a default.
// The TS side (packages/common/src/env.ts) reads the client's settings the same way.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace dtorch::common {

struct Settings {
  int64_t cpuDevices = 64;               // DTORCH_CPU_DEVICES: CPU devices (worker threads) meshes may name
  int64_t intraOpThreads = 0;            // DTORCH_INTRAOP_THREADS; 0 when unset: cores / CPU workers
  int64_t collectiveTimeoutMs = 600000;  // DTORCH_COLLECTIVE_TIMEOUT_MS: bounds every wait of a collective
  int64_t cudaBatchesInFlight = 4;       // DTORCH_CUDA_BATCHES_IN_FLIGHT
  int64_t graphCopyLimitMb = 16;         // DTORCH_GRAPH_COPY_LIMIT_MB: a span copying more per replay runs kernel by kernel
  int64_t replaySegmentNodes = 16384;    // DTORCH_REPLAY_SEGMENT_NODES: the segments a compiled call's copy is handed over in
  int64_t replayHeadNodes = 64;          // DTORCH_REPLAY_HEAD_NODES: a copy of this many compute nodes hands its first part over first (0: never)
  bool nccl = true;                      // DTORCH_NCCL
  bool copyEngines = true;               // DTORCH_COPY_ENGINES
  bool copyEngineReductions = false;     // DTORCH_COPY_ENGINE_REDUCTIONS
  bool fusion = true;                    // DTORCH_FUSION
  bool graphs = true;                    // DTORCH_GRAPHS: recognise repeated segments
  bool rmsNormKernel = true;             // DTORCH_RMS_NORM_KERNEL
  bool scalarOpKernel = true;            // DTORCH_SCALAR_OP_KERNEL
  bool rotaryKernel = true;              // DTORCH_ROTARY_KERNEL
  bool loraJoin = true;                  // DTORCH_LORA_JOIN: fuse an unfused LoRA adapter's [x | A x] (lora_join)
  bool loraTall = true;                  // DTORCH_LORA_TALL: a narrowing linear's A x as extra output columns of its base matmul ([W; A])
  bool matmulTuning = false;             // DTORCH_MATMUL_TUNING: time cuBLASLt's candidates per linear shape on GPUs (tuned_matmul.h)
  bool convChannelsLast = false;         // DTORCH_CONV_CHANNELS_LAST: 16-bit convolutions on GPUs read and write channels last (image.cpp)
};

// The settings of this process, parsed once. While a value is malformed every call throws the
// same error; the engine calls this on the JS thread before it starts any worker
// (Engine::createMesh), so the native threads that read it later never see the error.
const Settings& settings();

// The settings `lookup` gives (a variable's value, or null when unset); throws as settings().
// Unset and empty variables keep their defaults.
Settings parseSettings(const std::function<const char*(const char*)>& lookup);

// The variable's value, or `fallback` when it is unset or empty.
std::string envString(const char* name, const std::string& fallback);

}  // namespace dtorch::common
