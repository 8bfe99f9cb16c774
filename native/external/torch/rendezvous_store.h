// The rendezvous store of a cluster: the c10d key-value store its process groups (Gloo on CPUs,
// NCCL on GPUs) meet through. It lives in the main node's process (c10d's HashStore) and has no
// port: the main node's own participants use it directly, and a worker's calls reach it through a
// relay over the worker's authenticated control-plane session (relay_store.h), which the main
// node answers with `answer`. `connect` is a plain c10d TCPStore client, for probing a port.
// Every wait is bounded and fails as a DTorchError (TIMEOUT, NETWORK_ERROR), never a hang.
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "external/torch/relay_store.h"

namespace c10d {
class Store;
}

namespace dtorch::external::torch {

class RendezvousStore {
 public:
  // A store in this process (the main node's); `timeoutMs` bounds its own gets.
  static std::shared_ptr<RendezvousStore> local(int64_t timeoutMs);
  // A store in another process, reached through `relay` (a worker's view of the main node's).
  static std::shared_ptr<RendezvousStore> relayed(std::shared_ptr<StoreRelay> relay, int64_t timeoutMs);
  // A c10d TCPStore client of host:port, trying for up to `timeoutMs`.
  static std::shared_ptr<RendezvousStore> connect(const std::string& host, int port, int64_t timeoutMs);

  void set(const std::string& key, const std::vector<uint8_t>& value);
  // The value of `key`, waiting for it to be set (TIMEOUT after the store's timeout).
  std::vector<uint8_t> get(const std::string& key);
  // Adds `delta` to the counter `key` (0 when unset) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Whether every key is set, without waiting.
  bool check(const std::vector<std::string>& keys);

  // A local store runs a relayed call of node `origin` (the main node, for a worker's session),
  // waiting as the request says but no longer once `origin` is forgotten or the store closed. A
  // request that is malformed or fails is answered with its error; this never throws.
  StoreReply answer(int origin, const StoreRequest& request);
  // The waits of `origin`'s calls end now, and its later calls fail (its session ended).
  void forget(int origin);
  // Every wait of `answer` ends now; a relayed store's calls fail with `why` from now on.
  void close(const std::string& why);
  // The relay of a relayed store (the bindings hand it its replies); null for the others.
  std::shared_ptr<StoreRelay> relay() const { return relay_; }

  // The c10d store itself, shared, for c10d's process groups (process_group.h) to meet through.
  c10::intrusive_ptr<c10d::Store> c10dStore() const;

  RendezvousStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout, bool local, std::shared_ptr<StoreRelay> relay);
  ~RendezvousStore();

 private:
  // Waits for `keys` until `timeout`, in short slices so that forget(origin) or close ends it.
  void waitFor(int origin, const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool cancelled(int origin) const;

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  bool local_;
  std::shared_ptr<StoreRelay> relay_;
  mutable std::mutex mutex_;
  std::set<int> forgotten_;
  bool closed_ = false;
};

}  // namespace dtorch::external::torch
