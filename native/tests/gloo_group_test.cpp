// Gloo groups of 2 and 3 participants on threads of this process, over real Gloo TCP on
// loopback: each CommunicatorCall collective (no in-process rendezvous, as between processes)
// equals its plain ATen reference; two groups share one store; a group whose last participant
// never comes fails within its timeout. Participants that reach the store through relays (as a
// worker node's do: each call answered by the store's own process, on threads of their own) form
// groups with one that uses it directly; a relay that ends fails its waits at once. Aborted
// groups (abortGlooGroups) end their waits within a fraction of a second, and groups made later
// work.
#include <ATen/ATen.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "core/communication/communicator_call.h"
#include "external/torch/process_group.h"
#include "external/torch/relay_store.h"
#include "external/torch/rendezvous_store.h"
#include "tests/check.h"

namespace {

using dtorch::common::DTorchError;
using dtorch::core::CommunicatorCall;
using dtorch::core::ReduceOp;
using dtorch::external::torch::abortGlooGroups;
using dtorch::external::torch::glooCommunicator;
using dtorch::external::torch::RendezvousStore;
using dtorch::external::torch::StoreRelay;
using dtorch::external::torch::StoreRequest;
using namespace std::chrono_literals;

constexpr const char* kHost = "127.0.0.1";  // Gloo's device: loopback, every participant here

std::shared_ptr<RendezvousStore> store;

// Runs `body(p)` for participants 0..n-1 of a group, each on its own thread; 0 when all pass.
int onThreads(int n, const std::function<int(int)>& body) {
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int p = 0; p < n; ++p) {
    threads.emplace_back([&, p] {
      try {
        if (body(p) != 0) failed = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "participant %d threw: %s\n", p, e.what());
        failed = 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  return failed;
}

CommunicatorCall glooCall(const std::string& key, int p, int n, std::chrono::milliseconds timeout = 20s) {
  return CommunicatorCall(nullptr, p, n, [=] { return glooCommunicator(store, key, p, n, timeout, kHost); }, timeout);
}

// Participant p's tensor: small integers (exact in every dtype, so sums agree in any order).
at::Tensor inputOf(int p, at::ScalarType dtype, at::IntArrayRef shape) {
  const int64_t numel = c10::multiply_integers(shape);
  at::Tensor t = (at::arange(numel, at::kLong) * (p + 3) + p) % 7 - 3;
  if (dtype == at::kBool) t = (at::arange(numel, at::kLong) + p) % (p + 2) == 0;
  return t.reshape(shape).to(dtype);
}

// The reduction of `parts` in plain ATen: a bool sum or average is "any", max "any", min "all";
// an integer average floors.
at::Tensor reference(const std::vector<at::Tensor>& parts, ReduceOp op) {
  const at::Tensor all = at::stack(parts);
  const at::ScalarType dtype = parts[0].scalar_type();
  const auto n = static_cast<int64_t>(parts.size());
  if (dtype == at::kBool) return op == ReduceOp::kMin ? all.all(0) : all.any(0);
  switch (op) {
    case ReduceOp::kSum: return all.sum(0, false, dtype);
    case ReduceOp::kAvg:
      return c10::isIntegralType(dtype, false) ? all.sum(0, false, dtype).div(n, "floor") : all.sum(0, false, dtype).div(n);
    case ReduceOp::kMax: return all.amax(0);
    case ReduceOp::kMin: return all.amin(0);
  }
  return {};
}

bool same(const at::Tensor& got, const at::Tensor& want) {
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) {
    std::fprintf(stderr, "got %s %s, want %s %s\n", c10::toString(got.scalar_type()), c10::str(got.sizes()).c_str(),
                 c10::toString(want.scalar_type()), c10::str(want.sizes()).c_str());
    return false;
  }
  return got.equal(want);
}

// Every collective of one participant of a group of n, checked against its reference.
int collectives(CommunicatorCall& call, int p, int n) {
  // allGather: a [2, 11] tensor in torch.chunk pieces along dim 1 (11 over 3: 4, 4, 3)
  const at::Tensor whole = at::arange(22, at::kFloat).reshape({2, 11});
  CHECK(static_cast<int>(whole.chunk(n, 1).size()) == n);
  CHECK(same(call.allGather(whole.chunk(n, 1)[p], 1, 11), whole));

  // allReduce: every op on dtypes Gloo reduces (float, bfloat16) and ones widened first (int16, bool)
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kShort, at::kBool}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<at::Tensor> parts;
      for (int q = 0; q < n; ++q) parts.push_back(inputOf(q, dtype, {3, 5}));
      const at::Tensor got = call.allReduce(parts[p], op);
      if (!same(got, reference(parts, op))) {
        std::fprintf(stderr, "allReduce %s op %d differs\n", c10::toString(dtype), static_cast<int>(op));
        return 1;
      }
    }
  }

  // reduceScatter: [7, 3] along dim 0 (7 over 3: 3, 3, 1), a sum and a max, float and int16
  for (at::ScalarType dtype : {at::kFloat, at::kShort}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      std::vector<at::Tensor> parts;
      for (int q = 0; q < n; ++q) parts.push_back(inputOf(q, dtype, {7, 3}));
      const std::vector<at::Tensor> chunks = reference(parts, op).chunk(n, 0);
      CHECK(static_cast<int>(chunks.size()) == n);
      CHECK(same(call.reduceScatter(parts[p], op, 0), chunks[p]));
    }
  }

  // allToAll: a [5, 7] tensor sharded along dim 0 (5 over 3: 2, 2, 1) becomes sharded along
  // dim 1 (7 over 3: 3, 3, 1)
  const at::Tensor grid = at::arange(35, at::kInt).reshape({5, 7});
  CHECK(static_cast<int>(grid.chunk(n, 0).size()) == n && static_cast<int>(grid.chunk(n, 1).size()) == n);
  CHECK(same(call.allToAll(grid.chunk(n, 0)[p], /*splitDim=*/1, /*concatDim=*/0, /*concatSize=*/5), grid.chunk(n, 1)[p]));

  // shift: each sends its own (p + 2 elements) to the next and receives the previous one's
  auto ringPiece = [](int q) { return at::arange(q + 2, at::kDouble) + 10 * q; };
  const int previous = (p - 1 + n) % n;
  CHECK(same(call.shift(ringPiece(p), previous + 2), ringPiece(previous)));
  return 0;
}

// The dtypes the communicator reduces natively go through Gloo as they are; int16 does not
// (which is why CommunicatorCall widens it).
int nativeDtypes(int p, int n) {
  auto comm = glooCommunicator(store, "native", p, n, 20s, kHost);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kByte, at::kChar}) {
    CHECK(comm->reducesNatively(dtype));
    const at::Tensor send = inputOf(p, dtype, {4}).abs();  // abs: uint8 too
    std::vector<at::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(inputOf(q, dtype, {4}).abs());
    for (auto [reduction, op] : {std::pair{dtorch::external::Reduction::kSum, ReduceOp::kSum},
                                 std::pair{dtorch::external::Reduction::kMax, ReduceOp::kMax},
                                 std::pair{dtorch::external::Reduction::kMin, ReduceOp::kMin}}) {
      at::Tensor recv = at::empty_like(send);
      comm->allReduce(send, recv, reduction);
      if (!same(recv, reference(parts, op))) {
        std::fprintf(stderr, "native allReduce %s differs\n", c10::toString(dtype));
        return 1;
      }
    }
  }
  CHECK(!comm->reducesNatively(at::kShort) && !comm->reducesNatively(at::kBool));
  return 0;
}

// The same (store, key, participant) gives the same communicator, at once.
int cached(int p, int n) {
  auto first = glooCommunicator(store, "native", p, n, 20s, kHost);
  CHECK(glooCommunicator(store, "native", p, n, 20s, kHost) == first);
  return 0;
}

// Two groups on one store, at the same time, each with its own key.
int twoGroups() {
  return onThreads(5, [](int t) {
    const bool inA = t < 2;
    const int p = inA ? t : t - 2, n = inA ? 2 : 3;
    CommunicatorCall call = glooCall(inA ? "pair" : "trio", p, n);
    const at::Tensor got = call.allReduce(at::full({3}, p + 1, at::kFloat), ReduceOp::kSum);
    CHECK(same(got, at::full({3}, inA ? 3 : 6, at::kFloat)));
    return 0;
  });
}

// No host given: c10d's default device (this machine's hostname, else loopback) works too.
int defaultDevice() {
  return onThreads(2, [](int p) {
    auto comm = glooCommunicator(store, "default-device", p, 2, 20s, /*host=*/"");
    const at::Tensor send = at::full({2}, p + 1, at::kFloat);
    at::Tensor recv = at::empty_like(send);
    comm->allReduce(send, recv, dtorch::external::Reduction::kSum);
    CHECK(same(recv, at::full({2}, 3, at::kFloat)));
    return 0;
  });
}

// Participants 0 and 1 of a group of 3 whose participant 2 never comes: each fails with a
// DTorchError naming the group, within the timeout and a margin, and again at once if asked
// again.
int missingParticipant() {
  return onThreads(2, [](int p) {
    const auto start = std::chrono::steady_clock::now();
    try {
      glooCommunicator(store, "lonely", p, 3, 2s, kHost);
    } catch (const DTorchError& e) {
      const auto waited = std::chrono::steady_clock::now() - start;
      std::fprintf(stderr, "participant %d, as expected: [%s] %s\n", p, e.code().c_str(), e.what());
      CHECK(e.code() == dtorch::common::code::kTimeout || e.code() == dtorch::common::code::kNetwork);
      CHECK(std::string(e.what()).find("gloo group lonely") != std::string::npos);
      CHECK(waited >= 1900ms && waited < 10s);
      // the failure is kept: asking again fails at once, the same way
      const auto again = std::chrono::steady_clock::now();
      try {
        glooCommunicator(store, "lonely", p, 3, 2s, kHost);
      } catch (const DTorchError& retry) {
        CHECK(retry.code() == e.code() && std::string(retry.what()) == e.what());
        CHECK(std::chrono::steady_clock::now() - again < 500ms);
        return 0;
      }
      return 1;
    }
    std::fprintf(stderr, "participant %d: a group of 3 formed with 2\n", p);
    return 1;
  });
}

// A relayed view of `store` for node `origin`: each request is answered on a thread of its own
// (gets and waits block there), as the main node answers a worker's.
std::shared_ptr<RendezvousStore> relayedStore(int origin, std::shared_ptr<std::weak_ptr<StoreRelay>> self = nullptr) {
  auto relay = std::make_shared<std::weak_ptr<StoreRelay>>();
  auto r = std::make_shared<StoreRelay>([relay, origin](uint64_t id, const StoreRequest& request) {
    std::thread([relay, origin, id, request] {
      auto reply = store->answer(origin, request);
      if (auto live = relay->lock()) live->reply(id, std::move(reply));
    }).detach();
  });
  *relay = r;
  if (self) *self = r;
  return RendezvousStore::relayed(r, 30000);
}

// A group of 3: participant 0 on the store itself, 1 and 2 through relays; every collective.
int relayed() {
  std::vector<std::shared_ptr<RendezvousStore>> views{store, relayedStore(1), relayedStore(2)};
  return onThreads(3, [&](int p) {
    CommunicatorCall call(nullptr, p, 3, [&, p] { return glooCommunicator(views[p], "relayed", p, 3, 20s, kHost); }, 20s);
    return collectives(call, p, 3);
  });
}

// A participant whose relay ends while it waits for its peer fails at once (NETWORK_ERROR), not
// at the group's timeout.
int relayEnded() {
  auto relay = std::make_shared<std::weak_ptr<StoreRelay>>();
  auto view = relayedStore(7, relay);
  std::thread ender([relay] {
    std::this_thread::sleep_for(300ms);
    if (auto r = relay->lock()) r->end("the session ended");
  });
  const auto start = std::chrono::steady_clock::now();
  int result = 1;
  try {
    glooCommunicator(view, "ended", 0, 2, 20s, kHost);
  } catch (const DTorchError& e) {
    std::fprintf(stderr, "as expected: [%s] %s\n", e.code().c_str(), e.what());
    result = std::chrono::steady_clock::now() - start < 5s && std::string(e.what()).find("the session ended") != std::string::npos ? 0 : 1;
  }
  ender.join();
  return result;
}

// Groups whose participant 1 goes away after forming: participant 0's all-reduce and exchange
// (send/recv) wait for it until abortGlooGroups, then fail at once; a group made afterwards works.
int aborted() {
  std::atomic<int> failedFast{0};
  CHECK(onThreads(2, [&](int p) {
          CommunicatorCall reduce = glooCall("abandoned-reduce", p, 2);
          CommunicatorCall ring = glooCall("abandoned-ring", p, 2);
          CHECK(same(reduce.allReduce(at::ones({2}), ReduceOp::kSum), at::full({2}, 2.0f)));  // both formed
          CHECK(same(ring.shift(at::full({1}, p, at::kFloat), 1), at::full({1}, 1 - p, at::kFloat)));
          if (p == 1) return 0;  // goes away
          std::thread aborter([] {
            std::this_thread::sleep_for(300ms);
            abortGlooGroups("the test left the cluster");
          });
          const auto start = std::chrono::steady_clock::now();
          std::thread second([&] {
            try {
              ring.shift(at::ones({1}), 1);
            } catch (const DTorchError& e) {
              if (std::string(e.what()).find("aborted") != std::string::npos && std::chrono::steady_clock::now() - start < 3s) failedFast++;
            }
          });
          try {
            reduce.allReduce(at::ones({2}), ReduceOp::kSum);
          } catch (const DTorchError& e) {
            std::fprintf(stderr, "as expected: [%s] %s\n", e.code().c_str(), e.what());
            if (e.code() == dtorch::common::code::kNetwork && std::string(e.what()).find("the test left the cluster") != std::string::npos &&
                std::chrono::steady_clock::now() - start < 3s) {
              failedFast++;
            }
          }
          second.join();
          aborter.join();
          return 0;
        }) == 0);
  CHECK(failedFast == 2);
  return onThreads(2, [](int p) {
    CommunicatorCall call = glooCall("after-abort", p, 2);
    CHECK(same(call.allReduce(at::full({2}, p + 1, at::kFloat), ReduceOp::kSum), at::full({2}, 3.0f)));
    return 0;
  });
}

}  // namespace

int main() {
  store = RendezvousStore::local(30000);
  for (int n : {2, 3}) {
    const std::string key = "group" + std::to_string(n);
    CHECK(onThreads(n, [&](int p) {
            CommunicatorCall call = glooCall(key, p, n);
            return collectives(call, p, n);
          }) == 0);
  }
  CHECK(onThreads(2, [](int p) { return nativeDtypes(p, 2); }) == 0);
  CHECK(onThreads(2, [](int p) { return cached(p, 2); }) == 0);
  CHECK(twoGroups() == 0);
  CHECK(defaultDevice() == 0);
  CHECK(missingParticipant() == 0);
  CHECK(relayed() == 0);
  CHECK(relayEnded() == 0);
  CHECK(aborted() == 0);  // last: it ends every group made before it
  std::printf("gloo groups: ok\n");
  return 0;
}
