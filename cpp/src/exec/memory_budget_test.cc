#include "exec/memory_budget.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(MemoryBudget, BooksUnderTheLimitAndKeepsPeaksPerKind) {
  MemoryBudget b(100);
  EXPECT_TRUE(b.TryReserve(MemoryBudget::kDecoding, 60));
  EXPECT_FALSE(b.TryReserve(MemoryBudget::kDecoding, 50));
  b.Convert(MemoryBudget::kDecoding, 60, MemoryBudget::kDecoded, 40);
  EXPECT_TRUE(b.TryReserve(MemoryBudget::kDecoding, 50));
  b.Add(MemoryBudget::kBatches, 30);  // booked whatever the limit
  const auto s = b.snapshot();
  EXPECT_EQ(s.used, 120);
  EXPECT_EQ(s.peak, 120);
  EXPECT_EQ(s.peak_of[MemoryBudget::kDecoding], 60);
  EXPECT_EQ(s.peak_of[MemoryBudget::kDecoded], 40);
  EXPECT_EQ(s.peak_of[MemoryBudget::kBatches], 30);
  b.Release(MemoryBudget::kDecoded, 40);
  b.Release(MemoryBudget::kDecoding, 50);
  b.Release(MemoryBudget::kBatches, 30);
  EXPECT_EQ(b.snapshot().used, 0);
}

TEST(MemoryBudget, IdleBytesAreApartFromUsedButCountInTheExcess) {
  MemoryBudget b(100);
  b.Add(MemoryBudget::kIdle, 70);
  EXPECT_TRUE(b.TryReserve(MemoryBudget::kDecoding, 90));
  auto s = b.snapshot();
  EXPECT_EQ(s.used, 90);
  EXPECT_EQ(s.peak, 90);
  EXPECT_EQ(s.peak_of[MemoryBudget::kIdle], 70);
  EXPECT_EQ(b.Excess(), 60);
  b.Release(MemoryBudget::kIdle, 70);
  EXPECT_EQ(b.Excess(), 0);
  EXPECT_EQ(b.snapshot().used, 90);
}

TEST(MemoryBudget, ALargerReservationThanTheLimitNeedsUrgency) {
  MemoryBudget b(10);
  EXPECT_FALSE(b.TryReserve(MemoryBudget::kDecoding, 1000));
  EXPECT_TRUE(b.Reserve(MemoryBudget::kDecoding, 1000, [] { return true; }));
  EXPECT_EQ(b.snapshot().urgent_over_limit, 1);
  MemoryBudget unlimited(0);
  EXPECT_TRUE(unlimited.TryReserve(MemoryBudget::kDecoding, int64_t{1} << 50));
  EXPECT_TRUE(unlimited.TryReserve(MemoryBudget::kDecoding, int64_t{1} << 50));
}

TEST(MemoryBudget, ReserveWaitsForRoomOrUrgencyOrStop) {
  MemoryBudget b(100);
  ASSERT_TRUE(b.TryReserve(MemoryBudget::kDecoded, 90));
  // Room: a release lets the waiter in.
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = b.Reserve(MemoryBudget::kDecoding, 50, [] { return false; }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  b.Release(MemoryBudget::kDecoded, 90);
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(b.snapshot().waits, 1);

  // Urgency: goes past the limit once the predicate says so (after Wake).
  std::atomic<bool> urgent{false};
  std::thread pushy(
      [&] { got = b.Reserve(MemoryBudget::kDecoding, 80, [&] { return urgent.load(); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  urgent = true;
  b.Wake();
  pushy.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(b.snapshot().used, 130);
  EXPECT_EQ(b.snapshot().urgent_over_limit, 1);

  // Abandon: once the predicate says so (after Wake), nothing booked, false.
  std::atomic<bool> taken_over{false};
  std::thread abandoning([&] {
    got = b.Reserve(
        MemoryBudget::kDecoding, 80, [] { return false; }, [&] { return taken_over.load(); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  taken_over = true;
  b.Wake();
  abandoning.join();
  EXPECT_FALSE(got.load());
  EXPECT_EQ(b.snapshot().used, 130);

  // Stop: nothing booked, false.
  std::thread stopped([&] { got = b.Reserve(MemoryBudget::kDecoding, 80, [] { return false; }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  b.Stop();
  stopped.join();
  EXPECT_FALSE(got.load());
  EXPECT_EQ(b.snapshot().used, 130);
  EXPECT_FALSE(b.TryReserve(MemoryBudget::kDecoding, 0));
}

}  // namespace
}  // namespace shardfeed
