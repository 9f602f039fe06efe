#include "exec/batch_recycler.h"

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace shardfeed {
namespace {

int64_t IdleNow(const MemoryBudget& b) { return b.snapshot().peak_of[MemoryBudget::kIdle]; }

TEST(BatchRecycler, SizeClassesRoundUpByAnEighthOfThePowerOfTwo) {
  EXPECT_EQ(BatchRecycler::SizeClass(1), 4096u);
  EXPECT_EQ(BatchRecycler::SizeClass(4096), 4096u);
  EXPECT_EQ(BatchRecycler::SizeClass(4097), 8192u);
  EXPECT_EQ(BatchRecycler::SizeClass(size_t{4} << 20), size_t{4} << 20);
  EXPECT_EQ(BatchRecycler::SizeClass((size_t{4} << 20) + 1), (size_t{4} << 20) + (512 << 10));
  // Every size fits its class, with at most an eighth (or 4 KiB) to spare.
  for (size_t size = 1; size < (size_t{1} << 26); size = size * 3 + 7) {
    const size_t cls = BatchRecycler::SizeClass(size);
    EXPECT_GE(cls, size);
    EXPECT_LE(cls - size, std::max<size_t>(4096, size / 4)) << size;
    EXPECT_EQ(BatchRecycler::SizeClass(cls), cls);
  }
}

TEST(BatchRecycler, AFreedBufferIsHandedToTheNextBatchOfItsClass) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto recycler = std::make_shared<BatchRecycler>(budget, 1 << 20);
  {
    auto a = OutputBuffer::Make(100'000, recycler).ValueOrDie();
    std::memset(a->data(), 7, a->size());
    const uint8_t* where = a->data();
    a.reset();                                          // idle: booked as such, not as used
    EXPECT_EQ(recycler->counts().idle_bytes, 106'496);  // 13 steps of 8 KiB
    EXPECT_EQ(budget->snapshot().used, 0);
    EXPECT_EQ(IdleNow(*budget), 106'496);
    auto b = OutputBuffer::Make(99'000, recycler).ValueOrDie();  // same class
    EXPECT_EQ(b->data(), where);
    EXPECT_EQ(recycler->counts().idle_bytes, 0);
    auto c = OutputBuffer::Make(1'000, recycler).ValueOrDie();  // another class
    EXPECT_NE(c->data(), where);
  }
  const auto n = recycler->counts();
  EXPECT_EQ(n.reused, 1);
  EXPECT_EQ(n.allocated, 2);
  EXPECT_EQ(OutputBuffer::live_count(), 0);
}

TEST(BatchRecycler, PrefaultLeavesIdleBlocksForTheFirstBatchesWithinItsCap) {
  auto budget = std::make_shared<MemoryBudget>(0);
  // Room for two batches of a 64 KiB and a 4 KiB array, not three.
  auto recycler = std::make_shared<BatchRecycler>(budget, 2 * (65536 + 4096) + 4096);
  EXPECT_EQ(recycler->Prefault({65536, 100}, 3, 2), 2 * (65536 + 4096));
  auto n = recycler->counts();
  EXPECT_EQ(n.prefaulted, 4);
  EXPECT_EQ(n.allocated, 0);
  EXPECT_EQ(n.idle_bytes, 2 * (65536 + 4096));
  EXPECT_EQ(IdleNow(*budget), 2 * (65536 + 4096));
  EXPECT_EQ(budget->snapshot().used, 0);
  {
    // The first batches take them: no allocation, every byte writable.
    std::vector<std::shared_ptr<OutputBuffer>> held;
    for (int b = 0; b < 2; ++b) {
      held.push_back(OutputBuffer::Make(65536, recycler).ValueOrDie());
      held.push_back(OutputBuffer::Make(100, recycler).ValueOrDie());
      std::memset(held[held.size() - 2]->data(), 1, 65536);
      std::memset(held.back()->data(), 1, 100);
    }
    n = recycler->counts();
    EXPECT_EQ(n.reused, 4);
    EXPECT_EQ(n.allocated, 0);
    EXPECT_EQ(n.idle_bytes, 0);
  }
  EXPECT_EQ(recycler->Prefault({}, 3, 2), 0);  // nothing to make
  // Sizes from untrusted row counts: past the cap, nothing is made (no sum wraps).
  EXPECT_EQ(recycler->Prefault({SIZE_MAX / 2, SIZE_MAX / 2}, 3, 2), 0);
  EXPECT_EQ(recycler->Prefault({65536, 65536, 65536}, 3, 2), 0);  // one batch is over it
  EXPECT_EQ(recycler->counts().prefaulted, 4);
  EXPECT_EQ(OutputBuffer::live_count(), 0);
}

TEST(BatchRecycler, KeepsAtMostItsBytesAndFreesTheRestInTheNextAllocate) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto recycler = std::make_shared<BatchRecycler>(budget, 3 * 8192);
  {
    std::vector<std::shared_ptr<OutputBuffer>> held;
    for (int i = 0; i < 5; ++i) held.push_back(OutputBuffer::Make(8192, recycler).ValueOrDie());
  }  // three kept, two left to free
  EXPECT_EQ(recycler->counts().idle_bytes, 3 * 8192);
  auto again = OutputBuffer::Make(8192, recycler).ValueOrDie();
  EXPECT_EQ(recycler->counts().idle_bytes, 2 * 8192);
  EXPECT_EQ(recycler->counts().reused, 1);
  // One buffer is kept whatever its size.
  auto small = std::make_shared<BatchRecycler>(budget, 0);
  { auto big = OutputBuffer::Make(1 << 20, small).ValueOrDie(); }
  EXPECT_EQ(small->counts().idle_bytes, 1 << 20);
  { auto other = OutputBuffer::Make(1 << 20, small).ValueOrDie(); }
  EXPECT_EQ(small->counts().reused, 1);
}

TEST(BatchRecycler, KeepsMorePastItsCapWhileTheBudgetHasRoomAndHandsThemOver) {
  auto budget = std::make_shared<MemoryBudget>(6 * 8192);
  auto recycler = std::make_shared<BatchRecycler>(budget, 8192);
  ASSERT_TRUE(budget->TryReserve(MemoryBudget::kBatches, 2 * 8192));
  {
    std::vector<std::shared_ptr<OutputBuffer>> held;
    for (int i = 0; i < 5; ++i) held.push_back(OutputBuffer::Make(8192, recycler).ValueOrDie());
  }  // mid-epoch: the cap of one
  EXPECT_EQ(recycler->counts().idle_bytes, 8192);
  recycler->KeepWhileRoom();  // the end of the epoch
  {
    std::vector<std::shared_ptr<OutputBuffer>> held;
    for (int i = 0; i < 5; ++i) held.push_back(OutputBuffer::Make(8192, recycler).ValueOrDie());
  }  // past the cap of one: kept while booked and idle bytes fit in the limit
  EXPECT_EQ(recycler->counts().idle_bytes, 4 * 8192);
  EXPECT_EQ(budget->Room(), 0);
  // A block of another size: those kept past the cap go (they are not of it).
  { auto other = OutputBuffer::Make(3 * 4096, recycler).ValueOrDie(); }
  EXPECT_EQ(recycler->counts().idle_bytes, 8192 + 3 * 4096);

  // The idle blocks go to the next engine's recycler (and budget).
  std::vector<BatchRecycler::Block> left;
  recycler->Surrender(&left);
  EXPECT_EQ(recycler->counts().idle_bytes, 0);
  EXPECT_EQ(budget->snapshot().of[MemoryBudget::kIdle], 0);
  ASSERT_EQ(left.size(), 2u);
  auto next_budget = std::make_shared<MemoryBudget>(0);
  auto next = std::make_shared<BatchRecycler>(next_budget, 1 << 20);
  next->Adopt(&left);
  EXPECT_TRUE(left.empty());
  EXPECT_EQ(next->counts().idle_bytes, 8192 + 3 * 4096);
  auto again = OutputBuffer::Make(8192, next).ValueOrDie();
  EXPECT_EQ(next->counts().reused, 1);
  again->data()[8191] = 1;  // unpoisoned again (ASan checks)
  // Blocks nobody adopts are freed by their holder.
  std::vector<BatchRecycler::Block> orphans;
  next->Surrender(&orphans);
  BatchRecycler::FreeBlocks(&orphans);
  EXPECT_TRUE(orphans.empty());
}

TEST(BatchRecycler, ABufferMayOutliveTheEngineAndTheRecyclerReleasesItsBooking) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto recycler = std::make_shared<BatchRecycler>(budget, 1 << 20);
  auto kept = OutputBuffer::Make(5000, recycler).ValueOrDie();
  { auto idle = OutputBuffer::Make(70'000, recycler).ValueOrDie(); }
  EXPECT_GT(recycler->counts().idle_bytes, 0);
  recycler.reset();  // the buffer still holds it
  kept->data()[4999] = 1;
  kept.reset();  // the last holder: everything is freed, the booking released
  EXPECT_EQ(budget->Excess(), 0);
  EXPECT_EQ(OutputBuffer::live_count(), 0);
  ASSERT_TRUE(budget->TryReserve(MemoryBudget::kDecoding, 1));
  const auto snap = budget->snapshot();
  EXPECT_EQ(snap.used, 1);
}

TEST(BatchRecycler, ThreadsTakingAndDroppingBuffersAtOnceGetDistinctBlocks) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto recycler = std::make_shared<BatchRecycler>(budget, 64 * 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto a = OutputBuffer::Make(4000 + static_cast<size_t>(t), recycler).ValueOrDie();
        auto b = OutputBuffer::Make(9000, recycler).ValueOrDie();
        ASSERT_NE(a->data(), b->data());
        std::memset(a->data(), t, a->size());
        std::memset(b->data(), t, b->size());
        for (size_t k = 0; k < a->size(); k += 997) ASSERT_EQ(a->data()[k], t);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto n = recycler->counts();
  EXPECT_EQ(n.reused + n.allocated, 4 * 2000 * 2);
  EXPECT_GT(n.reused, n.allocated);
}

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer an idle block is poisoned: a batch array read after
// its buffer came back is reported like a use after free.
TEST(BatchRecycler, AnIdleBlockIsPoisoned) {
  auto budget = std::make_shared<MemoryBudget>(0);
  auto recycler = std::make_shared<BatchRecycler>(budget, 1 << 20);
  auto a = OutputBuffer::Make(10'000, recycler).ValueOrDie();
  const uint8_t* where = a->data();
  EXPECT_FALSE(__asan_address_is_poisoned(where + 9'999));
  a.reset();
  EXPECT_TRUE(__asan_address_is_poisoned(where));
  EXPECT_TRUE(__asan_address_is_poisoned(where + 9'999));
  auto b = OutputBuffer::Make(10'000, recycler).ValueOrDie();
  ASSERT_EQ(b->data(), where);
  EXPECT_FALSE(__asan_address_is_poisoned(where + 9'999));
}
#endif

}  // namespace
}  // namespace shardfeed
