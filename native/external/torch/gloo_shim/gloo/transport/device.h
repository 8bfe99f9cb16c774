// Declarations standing in for gloo's own header, which the torch wheels do not ship. Safe
// because ProcessGroupGloo.hpp holds gloo objects only behind pointers and we never construct or
// touch one (gloo_shim/README.md).
// ProcessGroupGloo.hpp holds devices and unbound buffers behind smart pointers: names are enough.
#pragma once

namespace gloo::transport {
class Device;
class UnboundBuffer;
}  // namespace gloo::transport
