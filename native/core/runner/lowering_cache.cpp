#include "core/runner/lowering_cache.h"

namespace dtorch::core {

const CachedLowering* LoweringCache::find(uint64_t key) {
  auto it = byKey_.find(key);
  if (it == byKey_.end()) return nullptr;
  recent_.splice(recent_.begin(), recent_, it->second);
  return &it->second->second;
}

void LoweringCache::put(uint64_t key, CachedLowering lowering) {
  if (auto it = byKey_.find(key); it != byKey_.end()) {
    it->second->second = std::move(lowering);
    recent_.splice(recent_.begin(), recent_, it->second);
    return;
  }
  recent_.emplace_front(key, std::move(lowering));
  byKey_.emplace(key, recent_.begin());
  if (recent_.size() > kCapacity) {
    byKey_.erase(recent_.back().first);
    recent_.pop_back();
  }
}

}  // namespace dtorch::core
