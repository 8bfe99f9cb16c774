#include "external/torch/rendezvous_store.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>

#include "common/error.h"

namespace dtorch::external::torch {

namespace {

using common::DTorchError;
using Clock = std::chrono::steady_clock;

// How often a relayed wait looks whether its caller is still there.
constexpr std::chrono::milliseconds kWaitSlice{100};

// Bounds of a relayed request (a worker's process groups use a few short keys and small values).
constexpr size_t kMaxKeys = 1024;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = 16u << 20;
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;

// c10d reports a timeout as c10::DistStoreError ("wait timeout after ...") and a refused or lost
// connection as c10::DistNetworkError; both become DTorchErrors naming the store and the key.
template <typename Body>
auto translated(const std::string& what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::DistNetworkError& e) {
    throw DTorchError(common::code::kNetwork, what + ": " + std::string(e.what_without_backtrace()));
  } catch (const c10::DistStoreError& e) {
    throw DTorchError(common::code::kTimeout, what + ": " + std::string(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    throw DTorchError(common::code::kNetwork, what + ": " + std::string(e.what_without_backtrace()));
  }
}

void checkTimeout(int64_t timeoutMs) {
  if (timeoutMs < 1) throw DTorchError(common::code::kInvalidArgument, "rendezvous store: the timeout must be at least 1 ms");
}

// What is wrong with a relayed request, or empty: a worker could not have meant it otherwise.
std::string problemOf(const StoreRequest& r) {
  using Op = StoreRequest::Op;
  const size_t keys = r.keys.size();
  switch (r.op) {
    case Op::kCheck:
    case Op::kWait:
      if (keys < 1 || keys > kMaxKeys) return "it names " + std::to_string(keys) + " keys (1 to " + std::to_string(kMaxKeys) + ")";
      break;
    case Op::kNumKeys:
      if (keys != 0) return "numKeys names no key";
      break;
    default:
      if (keys != 1) return std::string(storeOpName(r.op)) + " names one key, not " + std::to_string(keys);
  }
  for (const std::string& k : r.keys) {
    if (k.empty() || k.size() > kMaxKeyBytes) return "a key of " + std::to_string(k.size()) + " bytes (1 to " + std::to_string(kMaxKeyBytes) + ")";
  }
  if (r.value.size() > kMaxValueBytes || r.expected.size() > kMaxValueBytes) return "a value over " + std::to_string(kMaxValueBytes) + " bytes";
  if ((r.op == Op::kGet || r.op == Op::kWait) && (r.timeoutMs < 1 || r.timeoutMs > kMaxWaitMs)) {
    return "a timeout of " + std::to_string(r.timeoutMs) + " ms (1 ms to 24 h)";
  }
  return "";
}

}  // namespace

RendezvousStore::RendezvousStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout, bool local, std::shared_ptr<StoreRelay> relay)
    : store_(std::move(store)), timeout_(timeout), local_(local), relay_(std::move(relay)) {}

RendezvousStore::~RendezvousStore() {
  if (relay_) relay_->end("the store was closed");
}

std::shared_ptr<RendezvousStore> RendezvousStore::local(int64_t timeoutMs) {
  checkTimeout(timeoutMs);
  const std::chrono::milliseconds timeout(timeoutMs);
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(timeout);
  return std::make_shared<RendezvousStore>(std::move(store), timeout, true, nullptr);
}

std::shared_ptr<RendezvousStore> RendezvousStore::relayed(std::shared_ptr<StoreRelay> relay, int64_t timeoutMs) {
  checkTimeout(timeoutMs);
  if (!relay) throw DTorchError(common::code::kInvalidArgument, "rendezvous store: no relay");
  const std::chrono::milliseconds timeout(timeoutMs);
  return std::make_shared<RendezvousStore>(relayStore(relay, timeout), timeout, false, relay);
}

std::shared_ptr<RendezvousStore> RendezvousStore::connect(const std::string& host, int port, int64_t timeoutMs) {
  if (port < 0 || port > 65535) throw DTorchError(common::code::kInvalidArgument, "rendezvous store: port " + std::to_string(port) + " is not 0 to 65535");
  checkTimeout(timeoutMs);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = std::chrono::milliseconds(timeoutMs);
  const std::string what = "rendezvous store at " + host + ":" + std::to_string(port);
  auto store = translated(what, [&] { return c10::make_intrusive<c10d::TCPStore>(host, options); });
  return std::make_shared<RendezvousStore>(std::move(store), options.timeout, false, nullptr);
}

c10::intrusive_ptr<c10d::Store> RendezvousStore::c10dStore() const { return store_; }

void RendezvousStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  translated("rendezvous store set " + key, [&] { store_->set(key, value); });
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  return translated("rendezvous store get " + key, [&] {
    // a local store's timeout is shared with the groups that clone it: wait with this one's own
    if (local_) waitFor(-1, {key}, timeout_);
    return store_->get(key);
  });
}

int64_t RendezvousStore::add(const std::string& key, int64_t delta) {
  return translated("rendezvous store add " + key, [&] { return store_->add(key, delta); });
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  return translated("rendezvous store check", [&] { return store_->check(keys); });
}

bool RendezvousStore::cancelled(int origin) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_ || forgotten_.count(origin) > 0;
}

void RendezvousStore::waitFor(int origin, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    if (cancelled(origin)) throw DTorchError(common::code::kNetwork, "the wait was ended: the caller's session ended or the cluster shut down");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) C10_THROW_ERROR(DistStoreError, "wait timeout after " + std::to_string(timeout.count()) + " ms");
    try {
      store_->wait(keys, std::min(left, kWaitSlice));
      return;
    } catch (const c10::DistStoreError&) {
      // this slice ran out; look again
    }
  }
}

StoreReply RendezvousStore::answer(int origin, const StoreRequest& request) {
  using Op = StoreRequest::Op;
  StoreReply reply;
  try {
    if (!local_) throw DTorchError(common::code::kInvalidArgument, "only the store's own process answers relayed calls");
    const std::string problem = problemOf(request);
    if (!problem.empty()) throw DTorchError(common::code::kInvalidArgument, std::string("a malformed ") + storeOpName(request.op) + " request: " + problem);
    if (cancelled(origin)) throw DTorchError(common::code::kNetwork, "the store no longer answers node " + std::to_string(origin));
    const std::string& key = request.keys.empty() ? std::string() : request.keys.front();
    switch (request.op) {
      case Op::kSet: store_->set(key, request.value); break;
      case Op::kGet:
        waitFor(origin, request.keys, std::chrono::milliseconds(request.timeoutMs));
        reply.value = store_->get(key);
        break;
      case Op::kAdd: reply.number = store_->add(key, request.delta); break;
      case Op::kCheck: reply.number = store_->check(request.keys) ? 1 : 0; break;
      case Op::kWait: waitFor(origin, request.keys, std::chrono::milliseconds(request.timeoutMs)); break;
      case Op::kDeleteKey: reply.number = store_->deleteKey(key) ? 1 : 0; break;
      case Op::kNumKeys: reply.number = store_->getNumKeys(); break;
      case Op::kCompareSet: reply.value = store_->compareSet(key, request.expected, request.value); break;
    }
  } catch (const DTorchError& e) {
    reply = {e.code(), e.what(), {}, 0};
  } catch (const c10::DistStoreError& e) {
    reply = {common::code::kTimeout, e.what_without_backtrace(), {}, 0};
  } catch (const c10::Error& e) {
    reply = {common::code::kNetwork, e.what_without_backtrace(), {}, 0};
  } catch (const std::exception& e) {
    reply = {common::code::kInternal, e.what(), {}, 0};
  }
  return reply;
}

void RendezvousStore::forget(int origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  forgotten_.insert(origin);
}

void RendezvousStore::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  if (relay_) relay_->end(why);
}

}  // namespace dtorch::external::torch
