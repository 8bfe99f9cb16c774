// IdMap: an open-addressing hash map from positive 64-bit ids to values, for the engine's hot
// paths (blobs by tensor id, per-segment liveness). Linear probing with backward-shift
// deletion: no tombstones, no allocation per entry. Id 0 marks an empty slot.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dtorch::common {

template <typename V>
class IdMap {
 public:
  explicit IdMap(size_t capacity = 64) { rehash(roundUp(capacity * 2)); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  V* find(int64_t id) {
    size_t i = slot(id);
    while (keys_[i] != 0) {
      if (keys_[i] == id) return &values_[i];
      i = (i + 1) & mask_;
    }
    return nullptr;
  }
  const V* find(int64_t id) const { return const_cast<IdMap*>(this)->find(id); }
  bool contains(int64_t id) const { return find(id) != nullptr; }

  // Inserts or overwrites; returns a reference to the stored value.
  template <typename T>
  V& put(int64_t id, T&& value) {
    if ((size_ + 1) * 4 > keys_.size() * 3) rehash(keys_.size() * 2);
    size_t i = slot(id);
    while (keys_[i] != 0 && keys_[i] != id) i = (i + 1) & mask_;
    if (keys_[i] == 0) ++size_;
    keys_[i] = id;
    values_[i] = std::forward<T>(value);
    return values_[i];
  }

  // Inserts `value` only when `id` is absent; returns the stored value either way.
  template <typename T>
  V& tryPut(int64_t id, T&& value) {
    if (V* existing = find(id)) return *existing;
    return put(id, std::forward<T>(value));
  }

  bool erase(int64_t id) {
    size_t i = slot(id);
    while (keys_[i] != id) {
      if (keys_[i] == 0) return false;
      i = (i + 1) & mask_;
    }
    // backward-shift: pull later entries of the probe run into the hole
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
      const size_t home = slot(keys_[j]);
      const bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (movable) {
        keys_[hole] = keys_[j];
        values_[hole] = std::move(values_[j]);
        hole = j;
      }
    }
    keys_[hole] = 0;
    values_[hole] = V();
    --size_;
    return true;
  }

  void clear() {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != 0) {
        keys_[i] = 0;
        values_[i] = V();
      }
    }
    size_ = 0;
  }

  template <typename Fn>
  void forEach(Fn&& fn) {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != 0) fn(keys_[i], values_[i]);
    }
  }

 private:
  static size_t roundUp(size_t n) {
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
  }
  size_t slot(int64_t id) const {
    // Fibonacci hashing spreads groups of 8 consecutive ids over the table; inside a group they
    // sit side by side, so the ids an op stream makes one after another share cache lines (a
    // loop keeping 200,000 outputs misses the cache once per group, not once per id)
    const uint64_t group = static_cast<uint64_t>(id) >> 3;
    return static_cast<size_t>(((group * 0x9E3779B97F4A7C15ull) >> shift_ << 3) | (static_cast<uint64_t>(id) & 7)) & mask_;
  }
  void rehash(size_t capacity) {
    std::vector<int64_t> oldKeys = std::move(keys_);
    std::vector<V> oldValues = std::move(values_);
    keys_.assign(capacity, 0);
    values_.clear();
    values_.resize(capacity);
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (size_t i = 0; i < oldKeys.size(); ++i) {
      if (oldKeys[i] != 0) put(oldKeys[i], std::move(oldValues[i]));
    }
  }

  std::vector<int64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace dtorch::common
