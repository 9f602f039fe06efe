#include "exec/queue.h"

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(BoundedQueue, KeepsOrderAndBlocksWhenFull) {
  BoundedQueue<int> q(2);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.Push(i));
  });
  for (int i = 0; i < 100; ++i) {
    auto v = q.Pop();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, i);
    EXPECT_LE(q.size(), 2u);
  }
  producer.join();
}

TEST(BoundedQueue, StopWakesBlockedProducerAndConsumer) {
  BoundedQueue<int> full(1), empty(1);
  ASSERT_TRUE(full.Push(1));
  bool pushed = true;
  std::optional<int> popped = 0;
  std::thread producer([&] { pushed = full.Push(2); });
  std::thread consumer([&] { popped = empty.Pop(); });
  full.Stop();
  empty.Stop();
  producer.join();
  consumer.join();
  EXPECT_FALSE(pushed);
  EXPECT_FALSE(popped.has_value());
}

TEST(BoundedQueue, PopForTimesOutThenDelivers) {
  BoundedQueue<int> q(2);
  bool timed_out = false;
  EXPECT_FALSE(q.PopFor(std::chrono::milliseconds(5), &timed_out).has_value());
  EXPECT_TRUE(timed_out);
  q.Push(7);
  auto item = q.PopFor(std::chrono::milliseconds(5), &timed_out);
  EXPECT_FALSE(timed_out);
  ASSERT_TRUE(item.has_value());
  EXPECT_EQ(*item, 7);
  q.Stop();
  EXPECT_FALSE(q.PopFor(std::chrono::milliseconds(5), &timed_out).has_value());
  EXPECT_FALSE(timed_out);
}

}  // namespace
}  // namespace shardfeed
