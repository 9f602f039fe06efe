#include "exec/reorder.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(ReorderBuffer, WorkersInAnyTimingGiveTheConsumerUnitOrder) {
  constexpr int64_t kUnits = 2000, kCapacity = 8;
  ReorderBuffer<int64_t> buffer(kUnits, kCapacity);
  std::atomic<int64_t> in_flight{0}, most{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w));
      int64_t waited = 0;
      for (;;) {
        const int64_t unit = buffer.Claim([](int64_t) { return false; }, &waited);
        if (unit < 0) return;
        const int64_t now = ++in_flight;
        int64_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
        buffer.Put(unit, unit * 10);
      }
    });
  }
  for (int64_t u = 0; u < kUnits; ++u) {
    bool timed_out = false;
    auto item = buffer.Take(nullptr, &timed_out);
    ASSERT_TRUE(item.has_value());
    ASSERT_EQ(*item, u * 10);
    --in_flight;
    EXPECT_LE(buffer.size(), static_cast<size_t>(kCapacity));
  }
  for (auto& t : workers) t.join();
  // Claimed and not yet taken (+1: the count drops just after Take returns).
  EXPECT_LE(most.load(), kCapacity + 1);
}

TEST(ReorderBuffer, AFullBufferAsksForHelpBeforeSleeping) {
  ReorderBuffer<int> buffer(10, 2);
  int64_t waited = 0;
  auto none = [](int64_t) { return false; };
  ASSERT_EQ(buffer.Claim(none, &waited), 0);
  ASSERT_EQ(buffer.Claim(none, &waited), 1);
  std::vector<int64_t> asked;
  int helps = 3;
  std::atomic<int> calls{0};
  std::thread consumer([&] {
    buffer.Put(0, 0);
    bool timed_out = false;
    // Taken only after the worker helped three times and went to sleep.
    while (calls.load() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(buffer.Take(nullptr, &timed_out).has_value());
  });
  const int64_t unit = buffer.Claim(
      [&](int64_t ahead) {
        asked.push_back(ahead);
        ++calls;
        return helps-- > 0;
      },
      &waited);
  consumer.join();
  EXPECT_EQ(unit, 2);
  EXPECT_EQ(asked, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_GT(waited, 0);
}

// Take() wakes one sleeping worker, but every sleeper still gets to look for
// work ahead: two pieces of it appear while three workers sleep, and they are
// done by two workers at once (each waits for the other), not one after the
// other by the worker that claims the unit.
TEST(ReorderBuffer, EverySleepingWorkerGetsToWorkAheadAfterATake) {
  ReorderBuffer<int> buffer(100, 1);
  std::mutex mu;
  std::condition_variable cv;
  int work = 0;     // pieces of work ahead, offered after the workers sleep
  int arrived = 0;  // helpers inside a piece
  bool together = false;
  auto help = [&](int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    if (work == 0) return false;
    --work;
    ++arrived;
    cv.notify_all();
    together = cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived >= 2; });
    return true;
  };
  std::atomic<int> claimed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      int64_t waited = 0;
      for (;;) {
        const int64_t unit = buffer.Claim(help, &waited);
        if (unit < 0) return;
        ++claimed;
        buffer.Put(unit, 0);
      }
    });
  }
  // Unit 0 claimed and built; the three then sleep (the buffer holds one).
  bool timed_out = false;
  while (claimed.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    std::lock_guard<std::mutex> lock(mu);
    work = 2;
  }
  ASSERT_TRUE(buffer.Take(nullptr, &timed_out).has_value());
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived >= 2; }));
  }
  buffer.Stop();
  for (auto& t : workers) t.join();
  EXPECT_TRUE(together);
  EXPECT_EQ(work, 0);
}

TEST(ReorderBuffer, StopWakesWorkersAndTheConsumer) {
  ReorderBuffer<int> buffer(10, 1);
  int64_t waited = 0;
  auto none = [](int64_t) { return false; };
  ASSERT_EQ(buffer.Claim(none, &waited), 0);
  int64_t claimed = 0;
  std::optional<int> taken = 0;
  std::thread worker([&] { claimed = buffer.Claim(none, &waited); });
  std::thread consumer([&] {
    bool timed_out = false;
    taken = buffer.Take(nullptr, &timed_out);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  buffer.Stop();
  worker.join();
  consumer.join();
  EXPECT_EQ(claimed, -1);
  EXPECT_FALSE(taken.has_value());
  buffer.Put(0, 1);  // dropped
  EXPECT_EQ(buffer.size(), 0u);
  bool timed_out = false;
  const std::chrono::milliseconds wait(1);
  EXPECT_FALSE(buffer.Take(&wait, &timed_out).has_value());
}

}  // namespace
}  // namespace shardfeed
