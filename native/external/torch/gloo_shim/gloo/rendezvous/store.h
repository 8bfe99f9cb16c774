// Declarations standing in for gloo's own header, which the torch wheels do not ship. Safe
// because ProcessGroupGloo.hpp holds gloo objects only behind pointers and we never construct or
// touch one (gloo_shim/README.md).
// ProcessGroupGloo::GlooStore derives from Store and overrides these virtuals, so the class must
// exist with them; libtorch_cpu constructs GlooStores against gloo's real Store, we never do.
// GLOO_STORE_HAS_STORE_V2 stays undefined: the extended virtuals are not needed to compile.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) = 0;
};
}  // namespace gloo::rendezvous
