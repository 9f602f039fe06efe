// Stack matrices freed by decoded row groups, kept for the next decode
// (internal).
//
// A row group's matrix is tens of MB.  Taken from the allocator it is fresh
// pages each time: jemalloc purges freed extents of that size within its
// decay, and on the benchmark's 70 MB matrices nearly every page of every
// matrix faulted (0.92M page faults in four epochs of 1.1 GB; the transpose
// into fresh pages ran at half the speed of one into reused ones).  The pool
// keeps a few freed matrices and hands one to the next decode that needs that
// size.  Idle matrices are booked in the budget as MemoryBudget::kIdle: held,
// but not keeping a reservation out, because the decode that reserves takes
// one instead of allocating; when a decode finds none of its size while the
// budget is over its limit, idle ones are freed until it is not.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/result.h>

#include "exec/memory_budget.h"

namespace shardfeed {

// Whether an idle matrix of `capacity` bytes is handed to a decode that needs
// `bytes`: at most 1/16 larger.
inline bool MatrixFits(int64_t capacity, int64_t bytes) {
  return capacity >= bytes && capacity - bytes <= bytes / 16;
}

// Idle matrices between the engines of one stream (EngineLeftovers): those
// one engine no longer decodes into, for the others to take.  While they lie
// here they are the group's idle bytes (BudgetGroup::idle, in every member's
// Room and Excess).
class MatrixShelf {
 public:
  explicit MatrixShelf(std::shared_ptr<BudgetGroup> group) : group_(std::move(group)) {}
  ~MatrixShelf() { Clear(); }
  MatrixShelf(const MatrixShelf&) = delete;
  MatrixShelf& operator=(const MatrixShelf&) = delete;

  void Put(std::unique_ptr<arrow::Buffer> matrix);
  // The newest one that fits `bytes` as a pool's idle one must; null if none.
  std::unique_ptr<arrow::Buffer> TakeFit(int64_t bytes);
  // All of them, oldest first.
  std::deque<std::unique_ptr<arrow::Buffer>> TakeAll();
  void Clear();
  int64_t bytes() const;

 private:
  const std::shared_ptr<BudgetGroup> group_;  // may be null
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<arrow::Buffer>> matrices_;  // oldest first
  int64_t bytes_ = 0;
};

class MatrixPool : public std::enable_shared_from_this<MatrixPool> {
 public:
  struct Counts {
    int64_t reused = 0;      // matrices handed out again
    int64_t allocated = 0;   // matrices allocated
    int64_t prefaulted = 0;  // matrices made ahead by Prefault (not in `allocated`)
    int64_t idle_bytes = 0;
  };

  // Keeps at most `max_idle` matrices and `max_idle_bytes` (0: no byte cap),
  // or one matrix, whatever its size.
  MatrixPool(std::shared_ptr<MemoryBudget> budget, int max_idle, int64_t max_idle_bytes);
  ~MatrixPool();
  MatrixPool(const MatrixPool&) = delete;
  MatrixPool& operator=(const MatrixPool&) = delete;

  // A writable buffer of `bytes` (capacity up to 1/16 more when it is a
  // reused one).  When the last holder drops it, it comes back here (or is
  // freed, when the pool is full or gone).
  arrow::Result<std::shared_ptr<arrow::Buffer>> Take(int64_t bytes);

  Counts counts() const;

  // Makes matrices of these sizes (in order, while their total stays within
  // `max_bytes`), writes every page of them, and gives them back: those the
  // pool keeps are idle for the first decodes.  For a fresh process, whose
  // first decodes would otherwise fault in fresh pages while the consumer
  // waits (on some virtual machines at several times the cost of a reused
  // page).  Written by `threads` threads.  Returns the bytes touched.
  int64_t Prefault(const std::vector<int64_t>& sizes, int64_t max_bytes, int threads = 1);

  // The shelf of this pool's stream: a Take that finds no idle matrix of
  // its size here takes one from there (an engine started early, beside the
  // pass before, reuses what that one no longer decodes into).
  void UseShelf(std::shared_ptr<MatrixShelf> shelf);
  // Takes the shelf's matrices (oldest first), within this pool's caps (the
  // rest are freed), booked as kIdle.
  void Adopt();
  // Moves the idle matrices to the shelf (released from the budget).
  void Surrender();
  // Surrender(), and every matrix given back from now on goes to the shelf:
  // this pool's engine decodes no more.
  void Retire();

 private:
  friend class PooledBuffer;
  void GiveBack(std::unique_ptr<arrow::Buffer> backing);
  // Keeps `backing` idle (freeing older ones past the caps).
  void KeepLocked(std::unique_ptr<arrow::Buffer> backing, int64_t cap);
  // Frees the oldest idle matrices until `bytes` are freed or none is left.
  void FreeLocked(int64_t bytes);
  // Moves the idle matrices out, released from the budget.
  std::deque<std::unique_ptr<arrow::Buffer>> TakeIdleLocked();

  const std::shared_ptr<MemoryBudget> budget_;
  const int max_idle_;
  const int64_t max_idle_bytes_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<arrow::Buffer>> idle_;  // oldest first
  Counts counts_;
  std::shared_ptr<MatrixShelf> shelf_;  // (set before any Take)
  bool retired_ = false;
};

}  // namespace shardfeed
