// WorkQueue: what one thread hands another in order (the recorder's segments to the controller,
// the controller's kernel batches to a worker), with a stop that lets the taker drain what is
// queued first. Items are numbered 1, 2, ... as they are pushed.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace dtorch::common {

template <typename T>
class WorkQueue {
 public:
  // Appends `item`; `stamp(item, number)` runs first, under the queue's lock, so that numbers
  // follow the queue's order. Returns the item's number.
  template <typename Stamp>
  uint64_t push(T item, Stamp&& stamp) {
    uint64_t number;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      number = ++pushed_;
      stamp(item, number);
      items_.push_back(std::move(item));
    }
    wake_.notify_one();
    return number;
  }
  uint64_t push(T item) {
    return push(std::move(item), [](T&, uint64_t) {});
  }

  // Items pushed so far.
  uint64_t pushed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_;
  }

  // The taker ends once what is queued is taken.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
  }

  // Waits for items (at most `timeout` when given) and moves all of them to the end of `out`.
  // False once stopped and drained: the taker ends.
  bool takeAll(std::deque<T>& out, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    std::unique_lock<std::mutex> lock(mutex_);
    wait(lock, timeout);
    if (items_.empty()) return !stopping_;
    for (T& item : items_) out.push_back(std::move(item));
    items_.clear();
    return true;
  }

  // Waits for an item (at most `timeout` when given) and moves the first to `out` (left as it
  // is when none came in time). False once stopped and drained.
  bool takeOne(std::optional<T>& out, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    std::unique_lock<std::mutex> lock(mutex_);
    wait(lock, timeout);
    if (items_.empty()) return !stopping_;
    out.emplace(std::move(items_.front()));
    items_.pop_front();
    return true;
  }

 private:
  void wait(std::unique_lock<std::mutex>& lock, std::optional<std::chrono::milliseconds> timeout) {
    const auto ready = [this] { return stopping_ || !items_.empty(); };
    if (timeout) wake_.wait_for(lock, *timeout, ready);
    else wake_.wait(lock, ready);
  }

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<T> items_;
  uint64_t pushed_ = 0;
  bool stopping_ = false;
};

}  // namespace dtorch::common
