#include "external/torch/rendezvous_store.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/error.h"

namespace dtorch::external::torch {

namespace {

using common::DTorchError;

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

c10::intrusive_ptr<c10d::TCPStore> open(const std::string& host, int port, int64_t timeoutMs, bool isServer) {
  if (port < 0 || port > 65535) throw DTorchError(common::code::kInvalidArgument, "rendezvous store: port " + std::to_string(port) + " is not 0 to 65535");
  if (timeoutMs < 1) throw DTorchError(common::code::kInvalidArgument, "rendezvous store: the timeout must be at least 1 ms");
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = isServer;
  options.waitWorkers = false;
  options.timeout = std::chrono::milliseconds(timeoutMs);
  const std::string what = std::string("rendezvous store ") + (isServer ? "on " : "at ") + host + ":" + std::to_string(port);
  return translated(what, [&] { return c10::make_intrusive<c10d::TCPStore>(host, options); });
}

}  // namespace

RendezvousStore::RendezvousStore(c10::intrusive_ptr<c10d::TCPStore> store) : store_(std::move(store)) {}
RendezvousStore::~RendezvousStore() = default;

std::shared_ptr<RendezvousStore> RendezvousStore::serve(const std::string& host, int port, int64_t timeoutMs) {
  return std::make_shared<RendezvousStore>(open(host, port, timeoutMs, true));
}

std::shared_ptr<RendezvousStore> RendezvousStore::connect(const std::string& host, int port, int64_t timeoutMs) {
  return std::make_shared<RendezvousStore>(open(host, port, timeoutMs, false));
}

c10::intrusive_ptr<c10d::Store> RendezvousStore::c10dStore() const { return store_; }

int RendezvousStore::port() const { return store_->getPort(); }

void RendezvousStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  translated("rendezvous store set " + key, [&] { store_->set(key, value); });
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  return translated("rendezvous store get " + key, [&] { return store_->get(key); });
}

int64_t RendezvousStore::add(const std::string& key, int64_t delta) {
  return translated("rendezvous store add " + key, [&] { return store_->add(key, delta); });
}

}  // namespace dtorch::external::torch
