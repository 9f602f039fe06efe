#include "exec/memory_budget.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

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
  while (b.snapshot().waits < 1) {  // the waiter is counted under the lock it waits with
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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

TEST(MemoryBudget, BudgetsOfAGroupShareTheLimitAndWakeEachOther) {
  auto group = std::make_shared<BudgetGroup>();
  auto a = std::make_shared<MemoryBudget>(100, group);
  auto b = std::make_shared<MemoryBudget>(100, group);
  group->Join(a);
  group->Join(b);
  ASSERT_TRUE(a->TryReserve(MemoryBudget::kDecoded, 70));
  EXPECT_FALSE(b->TryReserve(MemoryBudget::kDecoding, 40));
  EXPECT_TRUE(b->TryReserve(MemoryBudget::kDecoding, 30));
  EXPECT_EQ(a->snapshot().used, 70);  // each its own counts, the limit on the sum
  EXPECT_EQ(b->snapshot().used, 30);
  EXPECT_EQ(group->used.load(), 100);
  b->Release(MemoryBudget::kDecoding, 30);

  // A waiter on one budget gets in when the other gives bytes back.
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = b->Reserve(MemoryBudget::kDecoding, 50, [] { return false; }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  a->Release(MemoryBudget::kDecoded, 70);
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(group->peak.load(), 100);

  // Idle bytes of one count in the other's excess and room.
  a->Add(MemoryBudget::kIdle, 80);
  EXPECT_EQ(b->Excess(), 30);
  EXPECT_EQ(b->Room(), 0);
  a->Release(MemoryBudget::kIdle, 80);
  EXPECT_EQ(b->Room(), 50);
  b->Release(MemoryBudget::kDecoding, 50);
  EXPECT_EQ(group->used.load(), 0);
  EXPECT_EQ(group->idle.load(), 0);
}

TEST(MemoryBudget, MembersBookingAtOnceNeverPassTheLimitTogether) {
  // Each member books under its own lock: the group's count decides exactly.
  auto group = std::make_shared<BudgetGroup>();
  std::vector<std::shared_ptr<MemoryBudget>> budgets;
  for (int i = 0; i < 4; ++i) {
    budgets.push_back(std::make_shared<MemoryBudget>(1000, group));
    group->Join(budgets.back());
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 20000; ++n) {
        const int64_t bytes = 1 + (n * 7 + i) % 300;
        if (budgets[static_cast<size_t>(i)]->TryReserve(MemoryBudget::kDecoding, bytes)) {
          budgets[static_cast<size_t>(i)]->Release(MemoryBudget::kDecoding, bytes);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(group->peak.load(), 1000);
  EXPECT_EQ(group->used.load(), 0);
}

TEST(MemoryBudget, MembersAskingTogetherGetExactlyWhatFits) {
  // Four members ask for 300 of a shared 1000 at the same moment, round after
  // round: exactly three get it every time.  (The loop above cannot tell
  // whether its threads overlapped; on a loaded machine they may not.)
  auto group = std::make_shared<BudgetGroup>();
  std::vector<std::shared_ptr<MemoryBudget>> budgets;
  for (int i = 0; i < 4; ++i) {
    budgets.push_back(std::make_shared<MemoryBudget>(1000, group));
    group->Join(budgets.back());
  }
  constexpr int kRounds = 300;
  std::atomic<int> granted{0};
  std::vector<int> grants;  // per round, written by the barrier's completion
  int phase = 0;
  std::barrier sync(4, [&]() noexcept {
    if (phase++ % 2 == 0) grants.push_back(granted.exchange(0));  // after the asks
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto& budget = *budgets[static_cast<size_t>(i)];
      for (int r = 0; r < kRounds; ++r) {
        const bool got = budget.TryReserve(MemoryBudget::kDecoding, 300);
        if (got) granted.fetch_add(1);
        sync.arrive_and_wait();  // every member has asked
        if (got) budget.Release(MemoryBudget::kDecoding, 300);
        sync.arrive_and_wait();  // every member has given back
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(grants.size(), static_cast<size_t>(kRounds));
  for (const int g : grants) ASSERT_EQ(g, 3);
  EXPECT_EQ(group->peak.load(), 900);
  EXPECT_EQ(group->used.load(), 0);
}

}  // namespace
}  // namespace shardfeed
