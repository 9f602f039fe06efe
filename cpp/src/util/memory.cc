#include "util/memory.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace shardfeed {

arrow::MemoryPool* EnginePool() {
#ifdef SHARDFEED_SYSTEM_POOL
  // Sanitizer builds: the system allocator, whose blocks ASan and TSan track
  // (jemalloc's arenas are invisible to them).
  static arrow::MemoryPool* const pool = arrow::system_memory_pool();
#else
  static arrow::MemoryPool* const pool = [] {
    arrow::MemoryPool* jemalloc = nullptr;
    if (arrow::jemalloc_memory_pool(&jemalloc).ok() && jemalloc != nullptr) {
      // Freed pages go back to the system after kDecayMs unused, not
      // jemalloc's default 10 s: with the default, memory the budget had
      // already released stayed resident (one-off runs over the benchmark's
      // 1.1M x 256 float32 table, not the benchmark: peak RSS 0.82-0.92 GB at
      // a 384 MiB limit, 0.73 GB at 200 ms, the same throughput; at 0 ms
      // throughput fell by a third).  Applies to the arenas made from here on:
      // those of the engine's threads.
      constexpr int kDecayMs = 200;
      (void)arrow::jemalloc_set_decay_ms(kDecayMs);
      return jemalloc;
    }
    return arrow::system_memory_pool();
  }();
#endif
  return pool;
}

void AdviseHugePages(void* data, int64_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + static_cast<uintptr_t>(size)) & ~(kHuge - 1);
  // A hint: where the kernel says no, the pages are 4 KiB ones as before.
  if (size > 0 && last > first) {
    (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#else
  (void)data;
  (void)size;
#endif
}

void WritePages(const std::vector<std::pair<uint8_t*, int64_t>>& ranges, int threads) {
  constexpr int64_t kPiece = int64_t{2} << 20;
  std::vector<std::pair<uint8_t*, int64_t>> pieces;
  for (const auto& [data, bytes] : ranges) {
    for (int64_t at = 0; at < bytes; at += kPiece) {
      pieces.emplace_back(data + at, std::min(kPiece, bytes - at));
    }
  }
  std::atomic<size_t> next{0};
  auto write = [&] {
    for (size_t i = next.fetch_add(1); i < pieces.size(); i = next.fetch_add(1)) {
      std::memset(pieces[i].first, 0, static_cast<size_t>(pieces[i].second));
    }
  };
  std::vector<std::thread> helpers;
  const int extra = std::min<int>(threads, static_cast<int>(pieces.size())) - 1;
  for (int t = 0; t < extra; ++t) helpers.emplace_back(write);
  write();
  for (auto& helper : helpers) helper.join();
}

}  // namespace shardfeed
