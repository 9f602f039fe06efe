#include "util/memory.h"

namespace shardfeed {

arrow::MemoryPool* EnginePool() {
  static arrow::MemoryPool* const pool = [] {
    arrow::MemoryPool* jemalloc = nullptr;
    if (arrow::jemalloc_memory_pool(&jemalloc).ok() && jemalloc != nullptr) return jemalloc;
    return arrow::system_memory_pool();
  }();
  return pool;
}

}  // namespace shardfeed
