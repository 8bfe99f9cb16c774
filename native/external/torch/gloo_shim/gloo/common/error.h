// Declarations standing in for gloo's own header, which the torch wheels do not ship. Safe
// because ProcessGroupGloo.hpp holds gloo objects only behind pointers and we never construct or
// touch one (gloo_shim/README.md).
// ProcessGroupGloo.hpp includes it and uses nothing from it.
#pragma once
