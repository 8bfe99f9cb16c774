#include "external/torch/relay_store.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/error.h"

namespace dtorch::external::torch {

namespace {

using Clock = std::chrono::steady_clock;

// What a reply may take beyond the call's own timeout to come back over the control plane. The
// main node answers a get or wait that runs out with TIMEOUT itself, at the timeout; this margin
// only bounds the wait for an answer that is lost on the way.
constexpr std::chrono::milliseconds kReplyMargin{5000};

std::string keysOf(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// The c10d store of a worker: each call goes through the relay to the main node's store.
class RelayStore final : public c10d::Store {
 public:
  RelayStore(std::shared_ptr<StoreRelay> relay, std::chrono::milliseconds timeout) : Store(timeout), relay_(std::move(relay)) {}

  c10::intrusive_ptr<c10d::Store> clone() override { return c10::make_intrusive<RelayStore>(relay_, timeout_); }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    StoreRequest r = request(StoreRequest::Op::kSet, {key});
    r.value = value;
    run(r);
  }

  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& currentValue, const std::vector<uint8_t>& newValue) override {
    StoreRequest r = request(StoreRequest::Op::kCompareSet, {key});
    r.expected = currentValue;
    r.value = newValue;
    return run(r).value;
  }

  std::vector<uint8_t> get(const std::string& key) override {
    StoreRequest r = request(StoreRequest::Op::kGet, {key});
    r.timeoutMs = waitMs(timeout_);
    return run(r).value;
  }

  int64_t add(const std::string& key, int64_t value) override {
    StoreRequest r = request(StoreRequest::Op::kAdd, {key});
    r.delta = value;
    return run(r).number;
  }

  bool deleteKey(const std::string& key) override { return run(request(StoreRequest::Op::kDeleteKey, {key})).number != 0; }
  bool check(const std::vector<std::string>& keys) override { return run(request(StoreRequest::Op::kCheck, keys)).number != 0; }
  int64_t getNumKeys() override { return run(request(StoreRequest::Op::kNumKeys, {})).number; }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    StoreRequest r = request(StoreRequest::Op::kWait, keys);
    r.timeoutMs = waitMs(timeout);
    run(r);
  }

 private:
  static StoreRequest request(StoreRequest::Op op, std::vector<std::string> keys) {
    StoreRequest r;
    r.op = op;
    r.keys = std::move(keys);
    return r;
  }

  // c10d's "no timeout" is still bounded here: every wait can fail.
  static int64_t waitMs(std::chrono::milliseconds timeout) {
    return (timeout == kNoTimeout ? kDefaultTimeout : timeout).count();
  }

  StoreReply run(const StoreRequest& r) {
    const bool waits = r.op == StoreRequest::Op::kGet || r.op == StoreRequest::Op::kWait;
    const std::chrono::milliseconds budget = waits ? std::chrono::milliseconds(r.timeoutMs) : std::chrono::milliseconds(waitMs(timeout_));
    StoreReply reply = relay_->call(r, Clock::now() + budget + kReplyMargin);
    if (reply.code.empty()) return reply;
    // as c10d's own stores report them: a timeout is a DistStoreError, anything else a DistNetworkError
    const std::string what = std::string(storeOpName(r.op)) + " " + keysOf(r.keys) + " (the main node's answer): " + reply.message;
    if (reply.code == common::code::kTimeout) C10_THROW_ERROR(DistStoreError, what);
    C10_THROW_ERROR(DistNetworkError, what);
  }

  std::shared_ptr<StoreRelay> relay_;
};

}  // namespace

const char* storeOpName(StoreRequest::Op op) {
  switch (op) {
    case StoreRequest::Op::kSet: return "set";
    case StoreRequest::Op::kGet: return "get";
    case StoreRequest::Op::kAdd: return "add";
    case StoreRequest::Op::kCheck: return "check";
    case StoreRequest::Op::kWait: return "wait";
    case StoreRequest::Op::kDeleteKey: return "deleteKey";
    case StoreRequest::Op::kNumKeys: return "numKeys";
    case StoreRequest::Op::kCompareSet: return "compareSet";
  }
  return "?";
}

StoreRelay::StoreRelay(Send send) : send_(std::move(send)) {}

StoreReply StoreRelay::call(const StoreRequest& request, Clock::time_point deadline) {
  auto slot = std::make_shared<Pending>();
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) C10_THROW_ERROR(DistNetworkError, "the main node's rendezvous store is out of reach: " + why_);
    id = nextId_++;
    pending_[id] = slot;
  }
  try {
    send_(id, request);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.erase(id);
    C10_THROW_ERROR(DistNetworkError, std::string("cannot reach the main node's rendezvous store: ") + e.what());
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const bool woken = answered_.wait_until(lock, deadline, [&] { return slot->done || ended_; });
  pending_.erase(id);
  if (slot->done) return std::move(slot->reply);
  if (!woken) C10_THROW_ERROR(DistStoreError, std::string("no answer from the main node to a rendezvous store ") + storeOpName(request.op) + " in time");
  C10_THROW_ERROR(DistNetworkError, "the main node's rendezvous store is out of reach: " + why_);
}

void StoreRelay::reply(uint64_t id, StoreReply reply) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = pending_.find(id);
    if (found == pending_.end()) return;
    found->second->reply = std::move(reply);
    found->second->done = true;
    pending_.erase(found);
  }
  answered_.notify_all();
}

void StoreRelay::end(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    ended_ = true;
    why_ = why;
  }
  answered_.notify_all();
}

bool StoreRelay::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

size_t StoreRelay::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

c10::intrusive_ptr<c10d::Store> relayStore(std::shared_ptr<StoreRelay> relay, std::chrono::milliseconds timeout) {
  return c10::make_intrusive<RelayStore>(std::move(relay), timeout);
}

}  // namespace dtorch::external::torch
