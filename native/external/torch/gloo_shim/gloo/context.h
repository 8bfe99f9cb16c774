// Declarations standing in for gloo's own header, which the torch wheels do not ship. Safe
// because ProcessGroupGloo.hpp holds gloo objects only behind pointers and we never construct or
// touch one (gloo_shim/README.md).
// Contexts sit behind shared_ptrs; ProcessGroupGloo's inline setTimeout names
// Context::setTimeout, which we never call (it would resolve to gloo's own, inside libtorch_cpu).
#pragma once
#include <chrono>

#include "gloo/transport/device.h"

namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
