// WorkQueue: items come out in order and numbered as pushed, across threads; a timed take
// returns when nothing comes; a stop lets the taker drain what is queued, then ends it.
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/work_queue.h"
#include "tests/check.h"

using dtorch::common::WorkQueue;
using namespace std::chrono_literals;

struct Item {
  int value = 0;
  uint64_t number = 0;
};

int main() {
  // one pusher thread, one taker taking all at a time: order and numbers hold
  {
    WorkQueue<Item> queue;
    constexpr int kItems = 100000;
    std::thread pusher([&] {
      for (int i = 0; i < kItems; ++i) queue.push(Item{i, 0}, [](Item& item, uint64_t n) { item.number = n; });
      queue.stop();
    });
    std::deque<Item> taken;
    std::vector<Item> all;
    while (queue.takeAll(taken)) {
      for (Item& item : taken) all.push_back(item);
      taken.clear();
    }
    pusher.join();
    CHECK(static_cast<int>(all.size()) == kItems);  // a stop drains what was queued first
    for (int i = 0; i < kItems; ++i) CHECK(all[i].value == i && all[i].number == static_cast<uint64_t>(i) + 1);
    CHECK(queue.pushed() == kItems);
  }
  // a timed take with nothing queued returns in time, with nothing; one at a time after
  {
    WorkQueue<int> queue;
    std::optional<int> one;
    const auto start = std::chrono::steady_clock::now();
    CHECK(queue.takeOne(one, 20ms));
    CHECK(!one.has_value());
    CHECK(std::chrono::steady_clock::now() - start >= 15ms);
    CHECK(queue.push(7) == 1 && queue.push(8) == 2);
    CHECK(queue.takeOne(one) && one == 7);
    one.reset();
    queue.stop();
    CHECK(queue.takeOne(one) && one == 8);  // still drained after the stop
    one.reset();
    CHECK(!queue.takeOne(one) && !one.has_value());  // then the taker ends
    std::deque<int> rest;
    CHECK(!queue.takeAll(rest, 5ms) && rest.empty());
  }
  // a taker waiting without a timeout wakes at the stop
  {
    WorkQueue<int> queue;
    std::thread stopper([&] {
      std::this_thread::sleep_for(10ms);
      queue.stop();
    });
    std::deque<int> rest;
    CHECK(!queue.takeAll(rest));
    stopper.join();
  }
  return 0;
}
