// The rendezvous store of a cluster: LibTorch's c10d TCPStore, the key-value service its process
// groups (Gloo on CPUs, NCCL on GPUs) meet through. The main node serves it; each worker reaches
// it at the address the control plane's Welcome gives. Every wait is bounded by the store's
// timeout and fails as a DTorchError (TIMEOUT, NETWORK_ERROR), never a hang.
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Store;
class TCPStore;
}

namespace dtorch::external::torch {

class RendezvousStore {
 public:
  // Serves a store on host:port (port 0: a free one); `timeoutMs` bounds each get and wait.
  static std::shared_ptr<RendezvousStore> serve(const std::string& host, int port, int64_t timeoutMs);
  // Connects to the store at host:port, trying for up to `timeoutMs`.
  static std::shared_ptr<RendezvousStore> connect(const std::string& host, int port, int64_t timeoutMs);

  int port() const;
  void set(const std::string& key, const std::vector<uint8_t>& value);
  // The value of `key`, waiting for it to be set (TIMEOUT after the store's timeout).
  std::vector<uint8_t> get(const std::string& key);
  // Adds `delta` to the counter `key` (0 when unset) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);

  // The c10d store itself, shared, for c10d's process groups (process_group.h) to meet through.
  c10::intrusive_ptr<c10d::Store> c10dStore() const;

  explicit RendezvousStore(c10::intrusive_ptr<c10d::TCPStore> store);
  ~RendezvousStore();

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
};

}  // namespace dtorch::external::torch
