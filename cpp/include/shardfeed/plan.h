// The plan: a pure function from (row-group row counts, seed, epoch, shuffle
// settings, world size, rank) to the rank's sequence of samples, cut into
// batches (design invariants 1 and 2).
//
// The epoch's global sequence, the same for every world size:
//   1. row groups in a fresh order per epoch (Purpose::kFileOrder), or the
//      natural order without shuffle;
//   2. consecutive row groups of that order form mixing windows of
//      `window_row_groups` each; the rows of a window are permuted together
//      (Purpose::kMixingWindow, id = window index), which both permutes the rows
//      inside each row group and mixes rows across the window.
// Memory: one window's permutation costs 8 bytes per row of the window and the
// engine keeps the decoded row groups of the windows that in-flight batches
// touch; a wider window mixes better (rows of different row groups are
// interleaved at random) at that cost.
//
// shuffle="global" (global_shuffle): one window holds every row group and its
// rows are permuted by an IndexPermutation (Purpose::kGlobalPermutation), a
// uniform shuffle of the whole dataset that costs no memory per row beyond
// 2^16 rows (a table of 8 bytes per row below).
//
// Ranks take contiguous slices of the global sequence, so a rank reads only the
// row groups of the windows its slice covers.  drop_last=true: every rank gets
// floor(N / (W*B)) full batches and the tail of the sequence is dropped.
// drop_last=false: every sample is delivered exactly once; ranks get N/W
// samples (the first N%W ranks one more) and ceil(ceil(N/W)/B) batches each:
// full batches first, then the leftover rows spread evenly over the last ones.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/rng.h"

namespace shardfeed {

// The defaults here are the Python API's defaults too (it reads them from a
// default-constructed PlanOptions), so they are written down once.
struct PlanOptions {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  bool shuffle = true;
  int64_t window_row_groups = 4;  // Python: shuffle_window
  // Python: shuffle="global".  One window of every row group, its rows in a
  // IndexPermutation (no memory per row past 2^16 rows) instead of a table;
  // window_row_groups is then ignored.  Needs shuffle.
  bool global_shuffle = false;
  int64_t batch_size = 1024;
  int64_t world_size = 1;
  int64_t rank = 0;
  bool drop_last = true;

  // The range checks (batch_size >= 1, 0 <= rank < world_size, window >= 1),
  // the only place they are made; messages use the Python argument names.
  arrow::Status Validate() const;
};

struct SampleRef {
  int32_t row_group = 0;  // index into the catalog's row-group table
  int64_t row = 0;        // row inside that row group
};

class EpochPlan {
 public:
  static arrow::Result<std::shared_ptr<const EpochPlan>> Make(std::vector<int64_t> row_group_rows,
                                                              const PlanOptions& options);

  const PlanOptions& options() const { return options_; }
  int64_t num_batches() const { return num_batches_; }
  int64_t total_rows() const { return total_rows_; }
  // This rank's slice of the global sequence: [rank_begin, rank_begin + rank_size).
  int64_t rank_begin() const { return rank_begin_; }
  int64_t rank_size() const { return rank_size_; }
  // Batch b (0 <= b < num_batches) covers rank positions [BatchBegin(b), +BatchSize(b)).
  int64_t BatchBegin(int64_t b) const;
  int64_t BatchSize(int64_t b) const;
  // The batch that holds rank position `pos` (0 <= pos < rank_size).
  int64_t BatchOf(int64_t pos) const;

  // Row groups with rows per mixing window (the last may have fewer).  A row group
  // with no rows (all filtered out, or none written) joins a window without counting.
  int64_t WindowSize() const;
  // Window w holds order()[WindowFirst(w) .. WindowFirst(w + 1)).
  int64_t WindowFirst(int64_t w) const { return window_first_[static_cast<size_t>(w)]; }
  // Mixing windows, in global positions.
  int64_t num_windows() const { return static_cast<int64_t>(window_offsets_.size()) - 1; }
  int64_t WindowOf(int64_t global_pos) const;
  int64_t WindowBegin(int64_t w) const { return window_offsets_[static_cast<size_t>(w)]; }
  int64_t WindowEnd(int64_t w) const { return window_offsets_[static_cast<size_t>(w) + 1]; }

  // Samples at global positions [begin, end), in order.  Thread-safe.
  void Resolve(int64_t begin, int64_t end, std::vector<SampleRef>* out) const;

  // The row-group order of the epoch (indices into the catalog's table).
  const std::vector<int32_t>& order() const { return order_; }
  // The rows the epoch takes from row group `rg` (0: pruned by a filter, or none).
  int64_t RowGroupRows(int32_t rg) const { return rg_rows_[static_cast<size_t>(rg)]; }

 private:
  EpochPlan() = default;
  std::shared_ptr<const std::vector<int64_t>> WindowPermutation(int64_t w) const;

  PlanOptions options_;
  std::vector<int64_t> rg_rows_;
  std::vector<int32_t> order_;
  std::vector<int64_t> order_offsets_;   // global position of each row group in `order_`
  std::vector<int64_t> window_offsets_;  // global position of each window
  std::vector<int64_t> window_first_;    // index into order_ of each window's first row group
  int64_t total_rows_ = 0;
  int64_t rank_begin_ = 0;
  int64_t rank_size_ = 0;
  int64_t num_batches_ = 0;
  // Batch layout: `full_` batches of batch_size, then `tail_` batches sharing
  // `tail_rows_` rows (the first tail_rows_ % tail_ of them one row larger).
  int64_t full_ = 0;
  int64_t tail_ = 0;
  int64_t tail_rows_ = 0;

  // A few window permutations, recomputed if evicted (they are pure).
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> perms_;
  std::optional<IndexPermutation> global_;  // shuffle="global"
  // shuffle="global": where to start looking for the row group (in order_)
  // that holds a position: per bucket of 2^locate_shift_ positions, the one
  // holding its first position (at most 4 buckets per row group).
  int locate_shift_ = 0;
  std::vector<int32_t> locate_start_;
  size_t LocateGlobal(int64_t global) const;
};

}  // namespace shardfeed
