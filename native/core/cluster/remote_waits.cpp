#include "core/cluster/remote_waits.h"

namespace dtorch::core {

void RemoteWaits::expectRead(uint64_t seq, int node, std::shared_ptr<Completion> completion) {
  completion->remaining.store(1);
  std::lock_guard<std::mutex> lock(mutex_);
  waits_[seq] = Wait{std::move(completion), {node}};
}

std::shared_ptr<Completion> RemoteWaits::splitSync(std::shared_ptr<Completion> completion, size_t remoteNodes) {
  completion->remaining.store(static_cast<int>(remoteNodes) + 1);
  auto local = std::make_shared<Completion>();
  local->deliver = [completion](FetchResult&& result) { completion->finishPart(std::move(result)); };
  return local;
}

void RemoteWaits::expectSynced(uint64_t seq, const std::vector<int>& nodes, std::shared_ptr<Completion> completion) {
  if (nodes.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  waits_[seq] = Wait{std::move(completion), std::set<int>(nodes.begin(), nodes.end())};
}

void RemoteWaits::answer(int node, uint64_t seq, FetchResult&& result) {
  std::shared_ptr<Completion> completion;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = waits_.find(seq);
    if (found == waits_.end() || found->second.nodes.erase(node) == 0) return;
    completion = found->second.completion;
    if (found->second.nodes.empty()) waits_.erase(found);
  }
  completion->finishPart(std::move(result));
}

void RemoteWaits::failAll(const std::string& code, const std::string& message) {
  std::map<uint64_t, Wait> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open.swap(waits_);
  }
  for (auto& [seq, wait] : open) {
    FetchResult failure;
    failure.ok = false;
    failure.code = code;
    failure.message = message;
    wait.completion->finishPart(std::move(failure));
  }
}

size_t RemoteWaits::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waits_.size();
}

}  // namespace dtorch::core
