// The schedule: which of the plan's batches one engine delivers, in which
// order, and what each of them reads (design invariants 2 and 3).
//
// An engine yields the rank's batches start_batch + batch_offset + k * stride
// for k = 0, 1, ... (its "units"; unit k goes to worker thread k mod N).  One
// process uses offset 0 and stride 1; DataLoader worker i of n uses offset i
// and stride n, so that PyTorch, which takes batch j from worker j mod n,
// gets the rank's batches in order from start_batch on.
//
// Pure arithmetic over an EpochPlan: no threads, no I/O.  Every method is
// const and safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <arrow/result.h>

#include "shardfeed/plan.h"

namespace shardfeed {

// Global positions [begin, end) of the epoch's sequence.
struct Span {
  int64_t begin = 0;
  int64_t end = 0;
};

// Indices first..last, both included; empty when first > last.
struct Interval {
  int64_t first = 0;
  int64_t last = -1;
  bool empty() const { return first > last; }
  int64_t size() const { return empty() ? 0 : last - first + 1; }
};

class Schedule {
 public:
  // Checks 0 <= start_batch <= plan->num_batches() (start_batch ==
  // num_batches: a resume at the end of the epoch, nothing left to deliver)
  // and 0 <= batch_offset < batch_stride.
  static arrow::Result<std::shared_ptr<const Schedule>> Make(std::shared_ptr<const EpochPlan> plan,
                                                             int64_t start_batch,
                                                             int64_t batch_offset,
                                                             int64_t batch_stride);

  const EpochPlan& plan() const { return *plan_; }
  int64_t num_units() const { return num_units_; }
  // The rank's batch that unit k (0 <= k < num_units) delivers.
  int64_t BatchOfUnit(int64_t k) const { return first_batch_ + k * stride_; }
  // The global positions unit k reads.
  Span UnitSpan(int64_t k) const;
  // The samples of unit k, in order.
  void ResolveUnit(int64_t k, std::vector<SampleRef>* out) const;

  // The mixing window that holds global position `pos`.
  int64_t WindowOf(int64_t pos) const { return plan_->WindowOf(pos); }
  int64_t num_windows() const { return plan_->num_windows(); }
  // The windows unit k reads from (never empty: a batch holds a sample).
  Interval UnitWindows(int64_t k) const;
  // The units that read from window w (empty when none does).
  Interval UnitRange(int64_t w) const;
  int64_t UnitsOverlapping(int64_t w) const { return UnitRange(w).size(); }
  // The row groups of window w that the units read: exactly those (a rank or
  // a DataLoader worker may cover only part of a window), each once; in the
  // window's order when the units read all of it, else in order of first use.
  // Memoised for a few windows.
  std::vector<int32_t> NeededRowGroups(int64_t w) const;

  // The catalog files the units read (`file_of_row_group[rg]`: the file of
  // row group rg), each once, in the order in which they are first needed:
  // the order to fetch remote files in.
  std::vector<int32_t> FileFirstUseOrder(std::span<const int32_t> file_of_row_group) const;

 private:
  Schedule(std::shared_ptr<const EpochPlan> plan, int64_t first_batch, int64_t stride);
  std::vector<int32_t> ComputeNeeded(int64_t w) const;

  std::shared_ptr<const EpochPlan> plan_;
  int64_t first_batch_ = 0;
  int64_t stride_ = 1;
  int64_t num_units_ = 0;

  // Workers ask for the same few windows over and over; a window's answer
  // costs a Resolve of its units when they cover it only in part.
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::vector<int32_t>> needed_;
};

}  // namespace shardfeed
