// The one translation unit that includes ProcessGroupGloo.hpp: CMakeLists.txt defines
// USE_C10D_GLOO and puts gloo_shim/ (declarations in place of gloo's headers, which the torch
// wheels do not ship) on the include path for this file alone.
#include "external/torch/process_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "common/error.h"

namespace dtorch::external::torch {

namespace {

using common::DTorchError;
using Clock = std::chrono::steady_clock;

// How often a wait for a collective looks whether its groups were aborted (abortGlooGroups).
constexpr std::chrono::milliseconds kAbortSlice{100};

// abortGlooGroups' record: the groups opened before the latest abort are done for. The sends and
// receives being waited for are kept here so that an abort can wake their waits (their Work's
// abort()); a collective's wait looks at the epoch every kAbortSlice instead.
struct Aborts {
  std::atomic<uint64_t> epoch{0};
  std::mutex mutex;
  std::string why;
  std::map<c10d::Work*, c10::intrusive_ptr<c10d::Work>> pointToPoint;
};

Aborts& aborts() {
  static auto* a = new Aborts();  // never destroyed: a worker thread may still look at it at exit
  return *a;
}

// A c10d failure as a DTorchError naming `what` (the group and the call). Gloo's own timeouts
// are plain runtime_errors whose type we cannot name here, so past the deadline any failure is a
// TIMEOUT; before it, a NETWORK_ERROR (a peer gone, a connection refused).
[[noreturn]] void fail(const std::string& what, Clock::time_point start, std::chrono::milliseconds timeout, const std::exception& e) {
  const bool late = Clock::now() - start >= timeout || dynamic_cast<const c10::DistStoreError*>(&e) != nullptr;
  const auto* c10Error = dynamic_cast<const c10::Error*>(&e);
  const std::string why = c10Error ? c10Error->what_without_backtrace() : e.what();
  if (late) throw DTorchError(common::code::kTimeout, what + " timed out after " + std::to_string(timeout.count()) + " ms: " + why);
  throw DTorchError(common::code::kNetwork, what + " failed: " + why);
}

// The dtypes Gloo's reductions take (ProcessGroupGloo's type switch; gloo_group_test checks
// each); others are widened by the caller.
bool glooReduces(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kInt: case at::kLong: case at::kByte: case at::kChar: return true;
    default: return false;
  }
}

c10d::ReduceOp reduceOp(Reduction op) {
  switch (op) {
    case Reduction::kSum: return c10d::ReduceOp::SUM;
    case Reduction::kMax: return c10d::ReduceOp::MAX;
    case Reduction::kMin: return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

// Whole tensors as flat bytes: moving data is then the same for every dtype, Gloo's type switch
// or not. A contiguous tensor may still have any stride on a dim of size 1 ([1] with stride 3),
// which a flat view keeps; as_strided gives the dense one.
at::Tensor bytes(const at::Tensor& t) { return t.as_strided({t.numel()}, {1}).view(at::kByte); }

// One participant of a c10d group (Gloo now; NCCL's ProcessGroup later has the same calls).
// Every call waits for its Work, bounded by the group's timeout.
class BackendCommunicator final : public Communicator {
 public:
  BackendCommunicator(c10::intrusive_ptr<c10d::Backend> backend, std::string name, std::chrono::milliseconds timeout, uint64_t epoch)
      : backend_(std::move(backend)), name_(std::move(name)), timeout_(timeout), epoch_(epoch) {}
  int size() const override { return backend_->getSize(); }
  int position() const override { return backend_->getRank(); }
  bool reducesNatively(at::ScalarType dtype) const override { return glooReduces(dtype); }

  void allGather(const at::Tensor& send, at::Tensor& recv) override {
    checkCpu(send, "all-gather");
    checkCpu(recv, "all-gather");
    at::Tensor in = bytes(send), out = bytes(recv);
    run("all-gather", [&] { return backend_->_allgather_base(out, in); });
  }

  void allReduce(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    checkCpu(send, "all-reduce");
    checkCpu(recv, "all-reduce");
    recv.copy_(send);  // Gloo reduces in place
    allReduceInPlace(recv, op, "all-reduce");
  }

  // c10d's Gloo _reduce_scatter_base is itself an all-reduce of a copy, behind a Work whose wait
  // ignores the timeout (and some versions drop the op there: a max comes out as a sum), so the
  // all-reduce is done here, then this participant's block kept.
  void reduceScatter(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    checkCpu(send, "reduce-scatter");
    checkCpu(recv, "reduce-scatter");
    at::Tensor all = send.contiguous().clone();
    allReduceInPlace(all, op, "reduce-scatter");
    recv.view({-1}).copy_(all.view({-1}).narrow(0, position() * recv.numel(), recv.numel()));
  }

  // Every send and receive posted at once, then waited on: no order between pairs to deadlock.
  // Each exchange has its own tag (every participant counts the same).
  void exchange(const std::vector<at::Tensor>& sends, std::vector<at::Tensor>& recvs) override {
    const int tag = nextTag_;
    nextTag_ = nextTag_ == std::numeric_limits<int>::max() ? 0 : nextTag_ + 1;
    const Clock::time_point start = Clock::now();
    const std::string what = name_ + " exchange";
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    PointToPoint registered;
    try {
      checkAborted(what);
      for (int p = 0; p < size(); ++p) {
        const bool sending = sends[p].defined() && sends[p].numel() > 0;
        const bool receiving = recvs[p].defined() && recvs[p].numel() > 0;
        if (p == position()) {
          if (sending && receiving) recvs[p].copy_(sends[p]);
          continue;
        }
        if (sending) {
          checkCpu(sends[p], "send");
          std::vector<at::Tensor> t{bytes(sends[p])};
          works.push_back(backend_->send(t, p, tag));
        }
        if (receiving) {
          checkCpu(recvs[p], "recv");
          std::vector<at::Tensor> t{bytes(recvs[p])};
          works.push_back(backend_->recv(t, p, tag));
        }
      }
      registered.add(works, epoch_);
      for (const auto& work : works) {
        if (!work->wait(left(start))) throw DTorchError(common::code::kNetwork, what + " failed: aborted" + abortReason());
      }
    } catch (const DTorchError&) {
      throw;
    } catch (const std::exception& e) {
      fail(what, start, timeout_, e);
    }
  }

 private:
  void checkCpu(const at::Tensor& t, const char* call) const {
    if (!t.device().is_cpu() || !t.is_contiguous()) common::fail(common::code::kInternal, name_ + " " + call + " needs contiguous CPU tensors");
  }

  void allReduceInPlace(at::Tensor& t, Reduction op, const char* call) {
    run(call, [&] {
      std::vector<at::Tensor> tensors{t};
      c10d::AllreduceOptions options;
      options.reduceOp = reduceOp(op);
      options.timeout = timeout_;
      return backend_->allreduce(tensors, options);
    });
  }

  // The sends and receives of one exchange, registered for abortGlooGroups while they are waited for.
  class PointToPoint {
   public:
    // `epoch`: the group's; an abort since then aborts them at once
    void add(const std::vector<c10::intrusive_ptr<c10d::Work>>& works, uint64_t epoch) {
      Aborts& a = aborts();
      std::lock_guard<std::mutex> lock(a.mutex);
      for (const auto& w : works) {
        a.pointToPoint[w.get()] = w;
        if (a.epoch.load() != epoch) w->abort();
      }
      works_ = works;
    }
    ~PointToPoint() {
      Aborts& a = aborts();
      std::lock_guard<std::mutex> lock(a.mutex);
      for (const auto& w : works_) a.pointToPoint.erase(w.get());
    }

   private:
    std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  };

  // Starts a Work with `body` and waits for it.
  template <typename Body>
  void run(const char* call, Body&& body) {
    const Clock::time_point start = Clock::now();
    const std::string what = name_ + " " + call;
    try {
      checkAborted(what);
      waitFor(*body(), what, start);
    } catch (const DTorchError&) {
      throw;
    } catch (const std::exception& e) {
      fail(what, start, timeout_, e);
    }
  }

  std::chrono::milliseconds left(Clock::time_point start) const {
    return std::max(std::chrono::milliseconds(1), timeout_ - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
  }

  bool aborted() const { return aborts().epoch.load() != epoch_; }

  std::string abortReason() const {
    if (!aborted()) return "";
    Aborts& a = aborts();
    std::lock_guard<std::mutex> lock(a.mutex);
    return " (" + a.why + ")";
  }

  void checkAborted(const std::string& what) const {
    if (aborted()) throw DTorchError(common::code::kNetwork, what + " failed: the group was aborted" + abortReason());
  }

  // A collective's Work (c10d's plain Work::wait: it throws the work's own failure, or "timed
  // out" and may be waited for again), waited for in slices so that an abort ends the wait.
  void waitFor(c10d::Work& work, const std::string& what, Clock::time_point start) {
    for (;;) {
      checkAborted(what);
      const std::chrono::milliseconds rest = left(start);
      const std::chrono::milliseconds slice = std::min(rest, kAbortSlice);
      try {
        work.wait(slice);
        return;
      } catch (const std::exception&) {
        if (slice == rest || work.isCompleted()) throw;  // its own failure, or the group's timeout
      }
    }
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string name_;  // "gloo group <key> (participant p of n)", for messages
  std::chrono::milliseconds timeout_;
  uint64_t epoch_;  // aborts().epoch when it was made: once that moves on, the group is done for
  int nextTag_ = 0;
};

// The Gloo device this participant binds and advertises (process_group.h: `host`).
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> glooOptions(const std::string& host, std::chrono::milliseconds timeout) {
  auto options = host.empty() ? c10d::ProcessGroupGloo::Options::create_default(timeout)
                              : c10d::ProcessGroupGloo::Options::create(timeout);
  if (!host.empty()) options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host, /*lazyInit=*/false));
  options->timeout = timeout;
  return options;
}

std::shared_ptr<Communicator> createGloo(RendezvousStore& store, const std::string& groupKey, int position, int size,
                                         std::chrono::milliseconds timeout, const std::string& host) {
  const std::string name = "gloo group " + groupKey + " (participant " + std::to_string(position) + " of " + std::to_string(size) + ")";
  const Clock::time_point start = Clock::now();
  const uint64_t epoch = aborts().epoch.load();
  try {
    // A connection of its own: a c10d TCPStore client does one operation at a time, and Gloo
    // waits in the store for its peers, which would hold up every other participant in this
    // process that shares the connection. Its timeout bounds Gloo's gets as well as its waits.
    c10::intrusive_ptr<c10d::Store> connection = store.c10dStore()->clone();
    connection->setTimeout(timeout);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(groupKey, std::move(connection));
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, position, size, glooOptions(host, timeout));
    return std::make_shared<BackendCommunicator>(std::move(backend), name, timeout, epoch);
  } catch (const DTorchError&) {
    throw;
  } catch (const std::exception& e) {
    fail(name + " setup", start, timeout, e);
  }
}

}  // namespace

void abortGlooGroups(const std::string& why) {
  Aborts& a = aborts();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.why = why;
  a.epoch.fetch_add(1);
  for (auto& [raw, work] : a.pointToPoint) work->abort();  // their waits return false at once
}

std::shared_ptr<Communicator> glooCommunicator(std::shared_ptr<RendezvousStore> store, const std::string& groupKey, int position,
                                               int size, std::chrono::milliseconds timeout, const std::string& host) {
  if (!store) common::fail(common::code::kInvalidArgument, "gloo group " + groupKey + ": no rendezvous store");
  if (size < 1 || position < 0 || position >= size) {
    common::fail(common::code::kInvalidArgument, "gloo group " + groupKey + ": participant " + std::to_string(position) + " of " +
                                                     std::to_string(size) + " does not exist");
  }
  // One slot per participant, created under its own lock: the group's other participants in
  // this process create theirs meanwhile (they must, for any of them to finish). A group that
  // failed to form stays failed: its keys in the store are spent, a retry needs a new key.
  struct Slot {
    std::mutex creating;
    std::weak_ptr<RendezvousStore> store;  // a slot of a store since gone is stale
    std::shared_ptr<Communicator> communicator;
    std::optional<DTorchError> failure;
  };
  using Key = std::tuple<const RendezvousStore*, std::string, int>;
  static std::mutex mutex;
  static auto* slots = new std::map<Key, std::shared_ptr<Slot>>();  // never destroyed: live as long as the process
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& entry = (*slots)[Key(store.get(), groupKey, position)];
    if (!entry || entry->store.expired()) {
      entry = std::make_shared<Slot>();
      entry->store = store;
    }
    slot = entry;
  }
  std::lock_guard<std::mutex> lock(slot->creating);
  if (slot->failure) throw *slot->failure;
  if (!slot->communicator) {
    try {
      slot->communicator = createGloo(*store, groupKey, position, size, timeout, host);
    } catch (const DTorchError& e) {
      slot->failure = e;
      throw;
    }
  }
  return slot->communicator;
}

}  // namespace dtorch::external::torch
