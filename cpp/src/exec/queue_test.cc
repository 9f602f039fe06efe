#include "exec/queue.h"

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

}  // namespace
}  // namespace shardfeed
