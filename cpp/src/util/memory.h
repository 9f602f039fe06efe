// The memory pool of the engine's own allocations (internal).
#pragma once

#include <arrow/memory_pool.h>

namespace shardfeed {

// jemalloc when Arrow has it, else the system allocator.  Not Arrow's default
// (mimalloc in the pyarrow wheels): the engine allocates and frees row groups
// of tens of MB over and over, and mimalloc returned those pages to the
// system each time, so every epoch paid for fresh memory again (the first
// pass ran at a third of the speed of later ones; bench/README.md).
arrow::MemoryPool* EnginePool();

}  // namespace shardfeed
