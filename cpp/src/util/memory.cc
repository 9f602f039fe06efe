#include "util/memory.h"

namespace shardfeed {

arrow::MemoryPool* EnginePool() {
#ifdef SHARDFEED_SYSTEM_POOL
  // Sanitizer builds: the system allocator, whose blocks ASan and TSan track
  // (jemalloc's arenas are invisible to them).
  static arrow::MemoryPool* const pool = arrow::system_memory_pool();
#else
  static arrow::MemoryPool* const pool = [] {
    arrow::MemoryPool* jemalloc = nullptr;
    if (arrow::jemalloc_memory_pool(&jemalloc).ok() && jemalloc != nullptr) return jemalloc;
    return arrow::system_memory_pool();
  }();
#endif
  return pool;
}

}  // namespace shardfeed
