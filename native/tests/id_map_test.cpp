// IdMap against std::unordered_map under a random mix of puts, erases and finds.
#include <cstdio>
#include <random>
#include <unordered_map>

#include "common/id_map.h"
#include "tests/check.h"

int main() {
  dtorch::common::IdMap<int> map(4);
  std::unordered_map<int64_t, int> reference;
  std::mt19937_64 rng(1);
  for (int step = 0; step < 200000; ++step) {
    // ids cluster like tensor ids: mostly recent, sometimes old
    const int64_t id = 1 + static_cast<int64_t>(rng() % 2000);
    switch (rng() % 3) {
      case 0:
        map.put(id, step);
        reference[id] = step;
        break;
      case 1:
        CHECK(map.erase(id) == (reference.erase(id) == 1));
        break;
      default: {
        const int* found = map.find(id);
        auto it = reference.find(id);
        CHECK((found != nullptr) == (it != reference.end()));
        if (found) CHECK(*found == it->second);
      }
    }
    CHECK(map.size() == reference.size());
  }
  for (auto& [id, value] : reference) CHECK(map.find(id) && *map.find(id) == value);
  CHECK(map.tryPut(5000, 1) == 1 && map.tryPut(5000, 2) == 1);
  map.clear();
  CHECK(map.empty() && map.find(5000) == nullptr);
  std::printf("id_map_test: ok\n");
  return 0;
}
