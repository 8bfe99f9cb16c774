#include "core/communication/rendezvous.h"

#include "common/env.h"
#include "common/error.h"

namespace dtorch::core {

namespace {
[[noreturn]] void failWith(const KernelError& error) {
  common::fail(common::code::kKernelFailed, "a participant of this collective failed in " + error.op + ": " + error.message);
}
[[noreturn]] void timedOut(std::chrono::milliseconds timeout, int arrived, int size) {
  common::fail(common::code::kTimeout, "collective timed out after " + std::to_string(timeout.count()) + " ms with " +
                                           std::to_string(arrived) + " of " + std::to_string(size) +
                                           " participants arrived (raise DTORCH_COLLECTIVE_TIMEOUT_MS for long work)");
}
}  // namespace

std::chrono::milliseconds collectiveTimeout() {
  static const auto timeout = std::chrono::milliseconds(common::envInt("DTORCH_COLLECTIVE_TIMEOUT_MS", 600000));
  return timeout;
}

const std::vector<at::Tensor>& Rendezvous::exchange(int position, at::Tensor mine, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  slots_[position] = std::move(mine);
  if (++arrived_ == size_) allArrived_.notify_all();
  if (!allArrived_.wait_for(lock, timeout, [this] { return arrived_ == size_; })) {
    const int arrived = arrived_;
    ++departed_;
    timedOut(timeout, arrived, size_);
  }
  if (error_) {
    const auto error = error_;
    lock.unlock();
    depart();
    failWith(*error);
  }
  return slots_;
}

void Rendezvous::abandon(const std::shared_ptr<const KernelError>& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
  ++departed_;
  if (++arrived_ == size_) allArrived_.notify_all();
  if (departed_ == size_) slots_.clear();
}

void Rendezvous::depart() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (++departed_ == size_) slots_.clear();  // nobody reads any more: let the tensors go
}

void Mailbox::put(at::Tensor tensor, std::shared_ptr<const KernelError> error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tensor_ = std::move(tensor);
    error_ = std::move(error);
    full_ = true;
  }
  ready_.notify_all();
}

at::Tensor Mailbox::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return full_; })) timedOut(timeout, 0, 1);
  if (error_) failWith(*error_);
  at::Tensor out = tensor_;
  if (--receivers_ == 0) tensor_ = at::Tensor();  // the last reader lets it go
  return out;
}

}  // namespace dtorch::core
