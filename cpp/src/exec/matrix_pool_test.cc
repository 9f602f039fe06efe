#include "exec/matrix_pool.h"

#include <deque>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

int64_t Idle(const MemoryBudget& b) { return b.snapshot().peak_of[MemoryBudget::kIdle]; }

TEST(MatrixPool, AFreedMatrixIsHandedToTheNextDecodeOfItsSize) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 0);
  auto a = pool->Take(1 << 20).ValueOrDie();
  ASSERT_TRUE(a->is_mutable());
  EXPECT_EQ(a->size(), 1 << 20);
  const uint8_t* where = a->data();
  a->mutable_data()[0] = 7;
  a.reset();  // back to the pool, booked idle but not used
  EXPECT_EQ(pool->counts().idle_bytes, 1 << 20);
  EXPECT_EQ(budget->snapshot().used, 0);
  EXPECT_EQ(Idle(*budget), 1 << 20);

  // A slightly smaller one (within 1/16) reuses it; its capacity says so.
  auto b = pool->Take((1 << 20) - 1000).ValueOrDie();
  EXPECT_EQ(b->data(), where);
  EXPECT_EQ(b->size(), (1 << 20) - 1000);
  EXPECT_EQ(b->capacity(), 1 << 20);
  EXPECT_EQ(pool->counts().idle_bytes, 0);
  // A much smaller or a larger one does not.
  auto c = pool->Take(1 << 10).ValueOrDie();
  EXPECT_NE(c->data(), where);
  const auto n = pool->counts();
  EXPECT_EQ(n.reused, 1);
  EXPECT_EQ(n.allocated, 2);
}

TEST(MatrixPool, KeepsAtMostItsCountAndBytesNewestFirst) {
  auto budget = std::make_shared<MemoryBudget>(0);
  // (Sizes in multiples of 64: capacities are.)
  auto pool = std::make_shared<MatrixPool>(budget, 2, 3072);
  {
    auto a = pool->Take(1024).ValueOrDie();
    auto b = pool->Take(1024).ValueOrDie();
    auto c = pool->Take(1024).ValueOrDie();
  }
  EXPECT_EQ(pool->counts().idle_bytes, 2048);
  {
    auto d = pool->Take(1536).ValueOrDie();  // 2048 + 1536 > 3072: the oldest goes
  }
  EXPECT_EQ(pool->counts().idle_bytes, 2560);
  {
    auto big = pool->Take(4096).ValueOrDie();  // larger than the byte cap: kept alone
  }
  EXPECT_EQ(pool->counts().idle_bytes, 4096);
}

TEST(MatrixPool, KeepsMorePastTheByteCapWhileTheBudgetHasRoomAndHandsThemOver) {
  auto budget = std::make_shared<MemoryBudget>(8192);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 1024);
  ASSERT_TRUE(budget->TryReserve(MemoryBudget::kDecoded, 4096));
  {
    auto a = pool->Take(2048).ValueOrDie();
    auto b = pool->Take(2048).ValueOrDie();
  }
  // Past the cap of 1024, both fit beside the 4096 booked: kept.
  EXPECT_EQ(pool->counts().idle_bytes, 4096);
  EXPECT_EQ(budget->Room(), 0);
  { auto c = pool->Take(1024).ValueOrDie(); }  // no room for it: the others go
  EXPECT_EQ(pool->counts().idle_bytes, 1024);

  // The idle matrices go to the next engine's pool (and budget), within its caps.
  auto left = std::make_shared<MatrixShelf>(nullptr);
  pool->UseShelf(left);
  pool->Surrender();
  EXPECT_EQ(pool->counts().idle_bytes, 0);
  EXPECT_EQ(budget->snapshot().of[MemoryBudget::kIdle], 0);
  ASSERT_EQ(left->bytes(), 1024);
  auto all = left->TakeAll();
  const uint8_t* where = all.front()->data();
  left->Put(std::move(all.front()));
  auto next_budget = std::make_shared<MemoryBudget>(8192);
  auto next = std::make_shared<MatrixPool>(next_budget, 4, 0);
  next->UseShelf(left);
  next->Adopt();
  EXPECT_EQ(left->bytes(), 0);
  EXPECT_EQ(next_budget->snapshot().of[MemoryBudget::kIdle], 1024);
  auto again = next->Take(1024).ValueOrDie();
  EXPECT_EQ(again->data(), where);
  EXPECT_EQ(next->counts().reused, 1);
  EXPECT_EQ(next_budget->snapshot().of[MemoryBudget::kIdle], 0);
}

TEST(MatrixPool, ARetiredPoolsMatricesGoToTheShelfWhereTheStreamsOtherPoolTakesThem) {
  // Two engines of one stream: the pass ending (retired: it decodes no more)
  // and the next one, started beside it.  What the first frees is the
  // second's, counted as the group's idle bytes while it lies on the shelf.
  auto group = std::make_shared<BudgetGroup>();
  auto shelf = std::make_shared<MatrixShelf>(group);
  auto old_budget = std::make_shared<MemoryBudget>(1 << 20, group);
  auto new_budget = std::make_shared<MemoryBudget>(1 << 20, group);
  auto old_pool = std::make_shared<MatrixPool>(old_budget, 4, 0);
  auto new_pool = std::make_shared<MatrixPool>(new_budget, 4, 0);
  old_pool->UseShelf(shelf);
  new_pool->UseShelf(shelf);
  auto held = old_pool->Take(4096).ValueOrDie();  // its last window's, still in use
  { auto idle = old_pool->Take(2048).ValueOrDie(); }
  EXPECT_EQ(old_pool->counts().idle_bytes, 2048);
  old_pool->Retire();
  EXPECT_EQ(old_pool->counts().idle_bytes, 0);
  EXPECT_EQ(shelf->bytes(), 2048);
  EXPECT_EQ(group->idle.load(), 2048);
  const uint8_t* where = held->data();
  held.reset();  // given back after the retirement: to the shelf
  EXPECT_EQ(old_pool->counts().idle_bytes, 0);
  EXPECT_EQ(shelf->bytes(), 2048 + 4096);
  EXPECT_EQ(new_budget->Room(), (1 << 20) - 6144);  // the shelf's bytes count
  auto taken = new_pool->Take(4096).ValueOrDie();
  EXPECT_EQ(taken->data(), where);
  EXPECT_EQ(new_pool->counts().reused, 1);
  EXPECT_EQ(new_pool->counts().allocated, 0);
  EXPECT_EQ(shelf->bytes(), 2048);
  EXPECT_EQ(group->idle.load(), 2048);
  shelf->Clear();
  EXPECT_EQ(group->idle.load(), 0);
}

TEST(MatrixPool, ReadyBatchesDoNotTakeTheRoomOfIdleMatrices) {
  auto budget = std::make_shared<MemoryBudget>(4096);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 1024);
  // Ready batches fill the limit; the consumer takes them soon.
  ASSERT_TRUE(budget->TryReserve(MemoryBudget::kBatches, 4096));
  EXPECT_EQ(budget->Room(), 0);
  EXPECT_EQ(budget->Room(/*with_batches=*/false), 4096);
  {
    auto a = pool->Take(2048).ValueOrDie();
    auto b = pool->Take(2048).ValueOrDie();
  }
  EXPECT_EQ(pool->counts().idle_bytes, 4096);  // past the cap of 1024: kept
}

TEST(MatrixPool, IdleMatricesGiveWayWhenTheBudgetIsOver) {
  auto budget = std::make_shared<MemoryBudget>(4096);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 0);
  { auto a = pool->Take(2048).ValueOrDie(); }
  EXPECT_EQ(budget->Excess(), 0);
  // A reservation fits beside idle bytes (idle is not `used`) ...
  ASSERT_TRUE(budget->TryReserve(MemoryBudget::kDecoding, 3072));
  EXPECT_EQ(budget->Excess(), 1024);
  // ... and a decode that needs another size frees them first.
  auto other = pool->Take(100).ValueOrDie();
  EXPECT_EQ(pool->counts().idle_bytes, 0);
  EXPECT_EQ(budget->Excess(), 0);
}

TEST(MatrixPool, AMatrixMayOutliveItsPool) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 0);
  { auto idle = pool->Take(64).ValueOrDie(); }
  auto kept = pool->Take(4096).ValueOrDie();
  pool.reset();  // frees the idle one and releases its booking
  EXPECT_EQ(budget->snapshot().used, 0);
  kept->mutable_data()[4095] = 1;
  kept.reset();  // freed, not given back (ASan checks)
}

TEST(MatrixPool, PrefaultLeavesIdleMatricesForTheFirstTakes) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto pool = std::make_shared<MatrixPool>(budget, 3, 0);
  // Four sizes, room for three in the pool; max_bytes stops before the fourth too.
  const std::vector<int64_t> sizes = {1 << 16, 1 << 17, 1 << 16, 1 << 18};
  EXPECT_EQ(pool->Prefault(sizes, (1 << 16) * 4 + (1 << 17), 3), (1 << 16) * 2 + (1 << 17));
  EXPECT_EQ(pool->counts().prefaulted, 3);
  EXPECT_EQ(pool->counts().allocated, 0);
  EXPECT_EQ(pool->counts().idle_bytes, (1 << 16) * 2 + (1 << 17));
  {
    auto a = pool->Take(1 << 16).ValueOrDie();
    auto b = pool->Take(1 << 17).ValueOrDie();
    auto c = pool->Take(1 << 16).ValueOrDie();
    EXPECT_EQ(pool->counts().reused, 3);
    EXPECT_EQ(pool->counts().allocated, 0);  // nothing new for the first decodes
    EXPECT_EQ(a->data()[0], 0);
  }
  // Nothing to make: nothing touched.
  EXPECT_EQ(pool->Prefault({}, 1 << 30), 0);
  EXPECT_EQ(pool->Prefault({1 << 20}, 1 << 10), 0);
}

}  // namespace
}  // namespace shardfeed
