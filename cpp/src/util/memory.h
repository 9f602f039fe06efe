// The memory pool of the engine's own allocations (internal).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <arrow/memory_pool.h>

namespace shardfeed {

// jemalloc when Arrow has it, else the system allocator.  Not Arrow's default
// (mimalloc in the pyarrow wheels): the engine allocates and frees row groups
// of tens of MB over and over, and mimalloc returned those pages to the
// system each time, so every epoch paid for fresh memory again (the first
// pass ran at a third of the speed of later ones; bench/README.md).
arrow::MemoryPool* EnginePool();

// Asks the kernel to back the 2 MiB-aligned part of a fresh block of
// `size` bytes with transparent huge pages, where the system leaves that to
// madvise (Linux's default).  Matrices and batch buffers are tens of MB
// written once from end to end: at 4 KiB a page, faulting them in cost more
// than decoding into them in a loader's first epoch (bench_core's first window
// boundary).  Nothing on other systems, nor for blocks under 2 MiB.
void AdviseHugePages(void* data, int64_t size);

// Writes every page of these (address, bytes) ranges, in 2 MiB pieces shared
// by `threads` threads (this one included): memory made ahead of its first
// use, so that its page faults are paid now rather than while a consumer
// waits, spread over the cores as the work that would have faulted it.
void WritePages(const std::vector<std::pair<uint8_t*, int64_t>>& ranges, int threads);

}  // namespace shardfeed
