// A c10d store whose calls another process answers: a worker node's view of the cluster's
// rendezvous store, which lives in the main node's process and has no port of its own. Each call
// becomes a StoreRequest handed to a transport (the bindings send it over the worker's
// authenticated control-plane session), and blocks until the StoreReply with its id comes back,
// the call's deadline passes (TIMEOUT), or the relay ends (NETWORK_ERROR at once). Many calls may
// be in flight, from any threads (Gloo's connections are clones that share one relay).
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace dtorch::external::torch {

// One store call as it crosses to the process that holds the store (control.proto's StoreRequest).
struct StoreRequest {
  enum class Op { kSet, kGet, kAdd, kCheck, kWait, kDeleteKey, kNumKeys, kCompareSet };
  Op op = Op::kGet;
  std::vector<std::string> keys;  // one for every op but check and wait (one or more) and numKeys (none)
  std::vector<uint8_t> value;     // set: the value; compareSet: the desired value
  std::vector<uint8_t> expected;  // compareSet: the value it must have now (empty: unset)
  int64_t delta = 0;              // add
  int64_t timeoutMs = 0;          // get and wait: how long the keys may take to appear
};

// Its answer: `code` empty when done, else a DTorch error code and `message`.
struct StoreReply {
  std::string code, message;
  std::vector<uint8_t> value;  // get, compareSet
  int64_t number = 0;          // add: the new value; numKeys: the count; check, deleteKey: 1 or 0
};

const char* storeOpName(StoreRequest::Op op);

// The worker's end of the relay: numbers the calls, hands them to `send`, and wakes each caller
// when its reply comes (reply) or the relay ends (end). Thread-safe.
class StoreRelay {
 public:
  // Hands request `id` to the process that holds the store; throws when it cannot (the call then
  // fails at once). Called on the calling thread, never under the relay's lock.
  using Send = std::function<void(uint64_t id, const StoreRequest& request)>;
  explicit StoreRelay(Send send);

  // Sends `request` and waits for its reply until `deadline`; throws c10::DistStoreError past it,
  // c10::DistNetworkError once the relay ended. A reply with an error code is returned as it is.
  StoreReply call(const StoreRequest& request, std::chrono::steady_clock::time_point deadline);
  // The reply to call `id`; one nothing waits for (timed out, or unknown) is ignored.
  void reply(uint64_t id, StoreReply reply);
  // Fails every waiting and later call with `why` (the session ended); safe to call twice.
  void end(const std::string& why);
  bool ended() const;
  size_t pending() const;

 private:
  struct Pending {
    bool done = false;
    StoreReply reply;
  };
  Send send_;
  mutable std::mutex mutex_;
  std::condition_variable answered_;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  uint64_t nextId_ = 1;
  bool ended_ = false;
  std::string why_;
};

// The c10d::Store over `relay` (its clones share it), with `timeout` for its gets and waits. A
// call waits at most its timeout plus a margin for the answer to travel.
c10::intrusive_ptr<c10d::Store> relayStore(std::shared_ptr<StoreRelay> relay, std::chrono::milliseconds timeout);

}  // namespace dtorch::external::torch
