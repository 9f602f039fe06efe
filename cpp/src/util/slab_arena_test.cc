#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "shardfeed/output_arena.h"

namespace shardfeed {
namespace {

struct Owned {
  std::vector<uint8_t> memory;
  explicit Owned(size_t n) : memory(n) {}
};

// A slab of `size` bytes whose owner sets `*freed` when it goes.
std::shared_ptr<SlabArena> ArenaOf(size_t size, bool* freed = nullptr) {
  auto arena = std::make_shared<SlabArena>();
  auto* owned = new Owned(size + 64);
  const auto address = reinterpret_cast<uintptr_t>(owned->memory.data());
  arena->AddSlab(owned->memory.data() + (64 - address % 64) % 64, size,
                 std::shared_ptr<void>(owned, [freed](void* p) {
                   delete static_cast<Owned*>(p);
                   if (freed) *freed = true;
                 }));
  return arena;
}

TEST(SlabArena, HandsOutAlignedBlocksAndMergesThemBack) {
  auto arena = ArenaOf(1024);
  ASSERT_EQ(arena->stats().bytes, 1024);
  uint8_t* a = arena->Allocate(100);  // 128 bytes
  uint8_t* b = arena->Allocate(500);  // 512 bytes
  uint8_t* c = arena->Allocate(384);
  ASSERT_TRUE(a && b && c);
  for (auto* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(arena->stats().used_bytes, 1024);
  EXPECT_EQ(arena->Allocate(1), nullptr);
  EXPECT_EQ(arena->stats().misses, 1);
  // Free the middle, then its neighbours: one block of 1024 again.
  arena->Free(b, 500);
  EXPECT_EQ(arena->Allocate(600), nullptr);
  arena->Free(a, 100);
  arena->Free(c, 384);
  EXPECT_EQ(arena->stats().used_bytes, 0);
  EXPECT_EQ(arena->stats().peak_bytes, 1024);
  uint8_t* whole = arena->Allocate(1024);
  EXPECT_EQ(whole, a);
  EXPECT_TRUE(arena->Contains(whole + 1023));
  EXPECT_FALSE(arena->Contains(whole + 1024));
}

TEST(SlabArena, BuffersKeepTheSlabsAlive) {
  bool freed = false;
  auto arena = ArenaOf(4096, &freed);
  auto buffer = OutputBuffer::Make(1000, arena).ValueOrDie();
  EXPECT_TRUE(arena->Contains(buffer->data()));
  auto spill = OutputBuffer::Make(8192, arena).ValueOrDie();  // no room: the pool
  EXPECT_FALSE(arena->Contains(spill->data()));
  EXPECT_EQ(arena->stats().misses, 1);
  std::weak_ptr<SlabArena> weak = arena;
  arena.reset();
  EXPECT_FALSE(freed);  // the buffer still holds it
  buffer.reset();
  EXPECT_TRUE(freed);
  EXPECT_TRUE(weak.expired());
}

TEST(SlabArena, ThreadsAllocateAndFreeConcurrently) {
  auto arena = ArenaOf(64 * 1024);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&arena, t] {
      for (int i = 0; i < 2000; ++i) {
        auto buffer = OutputBuffer::Make(static_cast<size_t>(64 + (i * 37 + t) % 4000), arena);
        ASSERT_TRUE(buffer.ok());
        (*buffer)->data()[0] = static_cast<uint8_t>(i);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto stats = arena->stats();
  EXPECT_EQ(stats.used_bytes, 0);
  EXPECT_EQ(stats.allocations + stats.misses, 8000);
  EXPECT_NE(arena->Allocate(64 * 1024), nullptr);  // everything merged back
}

}  // namespace
}  // namespace shardfeed
