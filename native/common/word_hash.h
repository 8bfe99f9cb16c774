// WordHash: FNV-1a over 64-bit words, for the engine's structural keys (a segment's signature,
// a span's layout, a lowering's key): cheap, nothing allocated.
#pragma once
#include <cstdint>

namespace dtorch::common {

class WordHash {
 public:
  void add(uint64_t w) { value_ = (value_ ^ w) * 0x100000001b3ull; }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 0xcbf29ce484222325ull;
};

}  // namespace dtorch::common
