// Batch buffers that the consumer has dropped, kept for the workers' next
// batches (internal).
//
// The consumer -- the thread of the training loop -- frees each batch when it
// takes the next one.  Freed to the allocator, those buffers made that thread
// pay for the allocator's housekeeping: jemalloc purges decayed pages in the
// thread that frees, so about one next() in ten spent 0.3-0.8 ms in madvise
// (bench_core's [4096, 256] float32 batches: 40 us per batch on average, most
// of next()'s cost), and the workers faulted in fresh pages for every batch.
// The recycler takes a freed buffer without calling the allocator and hands it
// to the next batch array of the same size class.  Idle bytes are booked in
// the budget as MemoryBudget::kIdle, like the matrix pool's; a buffer it does
// not keep (over its byte cap) is freed by the next Allocate, in a worker.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exec/memory_budget.h"
#include "shardfeed/batch.h"

namespace shardfeed {

class BatchRecycler : public OutputArena {
 public:
  struct Counts {
    int64_t reused = 0;      // buffers handed out again
    int64_t allocated = 0;   // buffers taken from the engine's pool
    int64_t prefaulted = 0;  // buffers made ahead by Prefault (not in `allocated`)
    int64_t idle_bytes = 0;
  };

  // Keeps at most `max_idle_bytes` idle, or one buffer whatever its size, or
  // after KeepWhileRoom() more while the budget has room for them (until a
  // block of another size is needed).
  BatchRecycler(std::shared_ptr<MemoryBudget> budget, int64_t max_idle_bytes);
  ~BatchRecycler() override;
  BatchRecycler(const BatchRecycler&) = delete;
  BatchRecycler& operator=(const BatchRecycler&) = delete;

  // A block of SizeClass(size) bytes: an idle one of that class, else one
  // from the engine's pool (nullptr when it has none).  Frees what Free could
  // not keep first.
  uint8_t* Allocate(size_t size) override;
  // Keeps the block, or leaves it for the next Allocate to free: no allocator
  // call, so the consumer's thread never pays for the allocator.
  void Free(uint8_t* data, size_t size) override;

  Counts counts() const;

  // Makes the blocks of up to `batches` batches whose arrays have these sizes,
  // as many as the cap keeps, writes every page of them on `threads` threads,
  // and keeps them idle.  For a fresh process: its first window's batches
  // would otherwise fault in fresh blocks while the next window's decode
  // waits for them (on this project's VM, when the kernel had no huge pages
  // at hand, 6-8 ms per 4 MiB batch instead of 0.4, which delayed the second
  // window's decode by 40 ms and made the consumer wait at its boundary).
  // Returns the bytes made.
  int64_t Prefault(const std::vector<size_t>& sizes, int64_t batches, int threads);

  // From now on (the engine has claimed its last batch), keeps blocks past
  // the cap while the budget has room for them.
  void KeepWhileRoom() { keep_while_room_.store(true); }

  using Block = std::pair<size_t, uint8_t*>;  // (size class, data)

  // Takes idle blocks left by an earlier engine, within this recycler's cap
  // (the rest are freed by the next Allocate), booked as kIdle.
  void Adopt(std::vector<Block>* from);
  // Moves the idle blocks out (released from the budget; they stay poisoned),
  // to be adopted by the next engine; frees those it was not keeping.
  void Surrender(std::vector<Block>* to);
  // Frees blocks taken from a recycler.
  static void FreeBlocks(std::vector<Block>* blocks);

  // The capacity of a block for `size` bytes: `size` rounded up to an eighth
  // of its power of two (at least 4 KiB), so that batches whose sizes differ
  // a little (variable-length lists) still share blocks.
  static size_t SizeClass(size_t size);

 private:
  const std::shared_ptr<MemoryBudget> budget_;
  const int64_t max_idle_bytes_;
  std::atomic<bool> keep_while_room_{false};
  mutable std::mutex mu_;
  std::vector<Block> idle_;     // newest last
  std::vector<Block> to_free_;  // not kept; freed by a worker
  Counts counts_;
};

}  // namespace shardfeed
