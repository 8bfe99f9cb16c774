#include "core/communication/rendezvous.h"

#include <algorithm>
#include <atomic>
#include <functional>

#include "common/env.h"
#include "common/error.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {

namespace {
// A failure that reached the meeting: a wait that ran out (no op: raised here) reads as it is,
// a participant's upstream failure names its op; the code (TIMEOUT or KERNEL_FAILED) stays.
[[noreturn]] void failWith(const KernelError& error) {
  if (error.op.empty()) common::fail(error.code, error.message);
  common::fail(error.code, "a participant of this collective failed in " + error.op + ": " + error.message);
}
std::shared_ptr<const KernelError> timedOut(std::chrono::milliseconds timeout, int arrived, int size) {
  return std::make_shared<KernelError>(KernelError{
      "",
      "collective timed out after " + std::to_string(timeout.count()) + " ms with " + std::to_string(arrived) + " of " +
          std::to_string(size) + " participants arrived (raise DTORCH_COLLECTIVE_TIMEOUT_MS for long work)",
      0, common::code::kTimeout});
}
// 0: none, the environment's DTORCH_COLLECTIVE_TIMEOUT_MS holds
std::atomic<int64_t> timeoutOverrideMs{0};
}  // namespace

at::Tensor Contribution::readable(const c10::Device& device) const {
  external::cuda::waitFor(ready, tensor);
  if (tensor.device() == device) return tensor;
  // pinned host memory onto a GPU: queued on this thread's stream without waiting, the host
  // tensor held until the copy has read it (its worker can neither free nor overwrite it in place
  // meanwhile)
  if (device.is_cuda() && !tensor.is_cuda() && tensor.is_pinned()) {
    at::Tensor copy = tensor.to(device, /*non_blocking=*/true);
    external::cuda::keepUntilDone({tensor});
    return copy;
  }
  return tensor.to(device);
}

void finishReads(c10::ArrayRef<Contribution> read) {
  for (const Contribution& c : read) {
    if (c.tensor.defined() && c.tensor.is_cuda()) {
      if (!external::cuda::synchronizeThisThread(collectiveTimeout())) {
        common::fail(common::code::kTimeout, "copies between GPUs did not finish within " + std::to_string(collectiveTimeout().count()) + " ms");
      }
      return;
    }
  }
}

std::chrono::milliseconds collectiveTimeout() {
  const int64_t override = timeoutOverrideMs.load(std::memory_order_relaxed);
  return std::chrono::milliseconds(override > 0 ? override : common::settings().collectiveTimeoutMs);
}

void setCollectiveTimeout(std::chrono::milliseconds timeout) { timeoutOverrideMs.store(std::max<int64_t>(0, timeout.count())); }

const std::vector<Contribution>& Rendezvous::exchange(int position, at::Tensor mine, std::chrono::milliseconds timeout, int algorithm,
                                                      std::vector<std::shared_ptr<void>> readyFor) {
  std::shared_ptr<void> ready = external::cuda::markReady(mine);  // before taking the lock: it touches the stream
  std::unique_lock<std::mutex> lock(mutex_);
  slots_[position] = Contribution{std::move(mine), std::move(ready), std::move(readyFor)};
  algorithms_[position] = algorithm;
  if (++arrived_ == size_) allArrived_.notify_all();
  // a failure (a participant that abandoned, or one that waited too long) ends every wait at once
  if (!allArrived_.wait_for(lock, timeout, [this] { return arrived_ == size_ || error_ != nullptr; })) {
    // the first to give up fails the call for all: the waiting ones wake now and the late ones
    // fail as they arrive, so that no participant has a result another could not get
    error_ = timedOut(timeout, arrived_, size_);
    allArrived_.notify_all();
  }
  if (error_) {
    const auto error = error_;
    lock.unlock();
    depart();
    failWith(*error);
  }
  if (std::adjacent_find(algorithms_.begin(), algorithms_.end(), std::not_equal_to<>()) != algorithms_.end()) {
    lock.unlock();
    depart();
    common::fail(common::code::kInternal, "the participants of a collective chose different algorithms; nothing was launched (an engine bug: please report it)");
  }
  return slots_;
}

void Rendezvous::abandon(const std::shared_ptr<const KernelError>& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
  ++departed_;
  ++arrived_;
  allArrived_.notify_all();  // the others need not wait for the rest
  if (departed_ == size_) slots_.clear();
}

void Rendezvous::depart() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (++departed_ == size_) slots_.clear();  // nobody reads any more: let the tensors go
}

void Mailbox::put(at::Tensor tensor, std::shared_ptr<const KernelError> error) {
  std::shared_ptr<void> ready = external::cuda::markReady(tensor);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (full_) return;  // the receivers gave up waiting (take's timeout)
    slot_ = Contribution{std::move(tensor), std::move(ready), {}};
    error_ = std::move(error);
    full_ = true;
  }
  ready_.notify_all();
}

Contribution Mailbox::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return full_; })) {
    // every receiver fails alike: the later ones find this error instead of a late tensor
    error_ = timedOut(timeout, 0, 1);
    full_ = true;
    ready_.notify_all();
  }
  if (error_) failWith(*error_);
  Contribution out = slot_;
  if (--receivers_ == 0) slot_ = Contribution{};  // the last reader lets it go
  return out;
}

void Collection::put(int index, at::Tensor tensor, std::shared_ptr<const KernelError> error) {
  std::shared_ptr<void> ready = external::cuda::markReady(tensor);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_[index] = Contribution{std::move(tensor), std::move(ready), {}};
    if (error && !error_) error_ = std::move(error);
    ++arrived_;
  }
  complete_.notify_all();
}

std::vector<Contribution> Collection::takeAll(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int size = static_cast<int>(slots_.size());
  if (!complete_.wait_for(lock, timeout, [&] { return arrived_ == size; })) failWith(*timedOut(timeout, arrived_, size));
  if (error_) failWith(*error_);
  return std::exchange(slots_, std::vector<Contribution>(size));  // the pieces go with the reader
}

}  // namespace dtorch::core
