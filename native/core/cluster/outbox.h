// Outbox: op stream payloads waiting for the JS thread, which sends them (zeromq's sockets live
// there). Any thread may post; the first post into an empty outbox calls `notify` (the binding
// wakes the JS thread through a thread-safe function), and the JS thread takes them all, in order.
#pragma once
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace dtorch::core {

class Outbox {
 public:
  void setNotify(std::function<void()> notify) {
    std::lock_guard<std::mutex> lock(mutex_);
    notify_ = std::move(notify);
  }
  void post(std::string payload) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const bool wasEmpty = queue_.empty();
      queue_.push_back(std::move(payload));
      if (wasEmpty) wake = notify_;
    }
    if (wake) wake();
  }
  std::vector<std::string> takeAll() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(queue_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> queue_;
  std::function<void()> notify_;
};

}  // namespace dtorch::core
