// The engine: worker threads that decode, assemble and deliver batches in the
// plan's order (design invariant 3).
//
// Workers claim work units in order from one reorder buffer and hand each
// built unit back to it; the consumer takes unit k, k + 1, ... in order.  A
// worker claims a unit only while it is fewer than N * queue_depth units ahead
// of the consumer, and otherwise decodes the next windows' row groups.  So the
// stream does not depend on N or on timing, at most N * (queue_depth + 1)
// batches exist at once, and while one worker decodes a row group the others
// keep delivering.  Decoded row groups are shared between workers and
// dropped as soon as every batch of their mixing window has been assembled.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "shardfeed/batch.h"
#include "shardfeed/catalog.h"
#include "shardfeed/decoded_tier.h"
#include "shardfeed/filter.h"
#include "shardfeed/output.h"
#include "shardfeed/plan.h"

namespace shardfeed {

class FileCache;

// Idle memory that an engine leaves to the next engine given the same object
// (the epochs of one loader): the stack matrices and batch buffers it kept
// for reuse.  An engine takes what the object holds when it starts (as idle
// memory in its budget, within its caps: at most half of its limit in
// matrices, a sixteenth in batch buffers) and leaves its own idle memory in
// it when it stops; once its last decode is done, the matrices it frees go
// there at once, and an engine of the same object that finds no idle matrix
// of its size takes one from there (the next pass's, started early).  The
// engines given one object also share memory_limit: each books against what
// all of them hold, and one whose consumer has not asked for a batch yet
// never passes it.  Without it, each epoch's first decodes and batches wrote
// into fresh pages: on bench_core's 70 MB matrices about 280 MB of page faults
// per epoch, which made the first row groups of an epoch cost twice or three
// times the others, and the consumer wait at the first window boundary.
class EngineLeftovers {
 public:
  EngineLeftovers();
  ~EngineLeftovers();
  EngineLeftovers(const EngineLeftovers&) = delete;
  EngineLeftovers& operator=(const EngineLeftovers&) = delete;

  // Bytes held now (between engines; 0 while an engine holds them).
  int64_t bytes() const;
  // Frees what it holds.
  void Clear();

  struct Impl;  // (exec/leftovers.h)
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The defaults of the Python API (prefetch, prefetch_bytes) are read from a
// default-constructed EngineOptions, so they are written down once, here.
struct EngineOptions {
  OutputOptions output;
  int num_threads = 4;  // Python's default follows the CPU count instead
  int queue_depth = 8;  // batches ready per worker thread (N * this in all); Python: prefetch
  // The engine yields the rank's batches start_batch + batch_offset + i *
  // batch_stride, i = 0, 1, ...: DataLoader worker batch_offset of
  // batch_stride workers gets its share of a pass that resumes at start_batch.
  int64_t start_batch = 0;
  int64_t batch_offset = 0;
  int64_t batch_stride = 1;
  // Row groups after decoding and the deterministic transforms, kept on disk.
  std::shared_ptr<DecodedTier> decoded_tier;
  // Whole remote files kept on local disk (ignored for local datasets), and
  // how many bytes of them a background thread fetches ahead of use.
  std::shared_ptr<FileCache> file_cache;
  // The rows that pass a filter (the plan must be made over its pass_rows());
  // null: every row.
  std::shared_ptr<const FilteredRows> filter;
  int64_t prefetch_bytes = int64_t{256} << 20;
  // Bytes the engine may hold: row groups being decoded (read buffers,
  // Arrow's arrays, stack matrices), decoded row groups and built batches the
  // consumer has not taken (a quarter of it at most: fewer ready batches than
  // N * queue_depth when they would not fit).  A worker waits before a
  // decode that would pass it, except for the row groups of the consumer's
  // next batch.  So the peak is at most the limit, plus the batches built
  // since the last decode ahead (a quarter of the limit), plus the decodes of
  // the consumer's next batch (one row group's reservation, two where that
  // batch spans two windows); and at least one mixing window plus one decode.
  // 0: no limit.  Python: memory_limit (which also sizes the default shuffle
  // window, see PlanMemory).
  int64_t memory_limit = int64_t{384} << 20;
  // Where batch buffers come from (null: the engine's pool).  Python:
  // pin_memory=True gives page-locked slabs.
  std::shared_ptr<OutputArena> output_arena;
  // Idle memory handed from one engine to the next (see EngineLeftovers);
  // null: none.  Python: each Loader (and TorchDataset, per process) has one.
  std::shared_ptr<EngineLeftovers> leftovers;
  // Seconds the remote reads of one row group may take, retries included,
  // before a StorageError names the file; 0: no deadline.  Python: remote_timeout.
  double remote_timeout = 60.0;
  // Verify the CRC32 of every page that has one (pyarrow's
  // write_page_checksum, parquet-mr/Spark): a mismatch is an InvalidData
  // error instead of changed values.  Off by default: it cost 16-19% of the
  // throughput of bench_core.py on checksummed files (files without
  // checksums cost nothing either way).  Python: verify_page_checksums.
  bool verify_page_checksums = false;
  // Record every worker's timeline (for a Chrome/Perfetto trace).
  bool trace = false;
  // Test hooks: each unit sleeps a random 0..debug_max_delay_us microseconds;
  // each row group sleeps debug_slow_us in stage debug_slow_stage.
  int debug_max_delay_us = 0;
  std::string debug_slow_stage;
  int debug_slow_us = 0;

  // The range checks of the settings a user chooses (num_threads, queue_depth,
  // prefetch_bytes), the only place they are made; messages use the Python
  // argument names.  Engine::Make runs it.
  arrow::Status Validate() const;
};

struct StageStats {
  std::string name;  // fetch, read, decode, transform, assemble
  double seconds = 0;
  int64_t bytes = 0;
  int64_t rows = 0;
};

struct TraceRecord {
  int worker = 0;  // -1: the consumer
  std::string stage;
  double start_us = 0;
  double duration_us = 0;
  int64_t arg = 0;
};

struct EngineStats {
  int64_t row_groups_decoded = 0;
  int64_t rows_decoded = 0;
  int64_t bytes_decoded = 0;  // compressed bytes of the decoded column chunks
  // Stack member columns decoded (once per row group): straight into the
  // matrix a tile at a time, or through Arrow's arrays.
  int64_t stack_columns_tiled = 0;
  int64_t stack_columns_generic = 0;
  // Parts of a row group's decode (a stack's tile reads) run by a worker that
  // waited for that row group rather than by the one decoding it.
  int64_t decode_parts_shared = 0;
  int64_t batches = 0;
  int64_t rows_delivered = 0;
  int threads = 0;
  double elapsed_seconds = 0;               // since the engine started
  std::vector<StageStats> stages;           // busy time of the workers, per stage
  double worker_wait_seconds = 0;           // workers blocked on a full queue
  double consumer_wait_seconds = 0;         // consumer blocked on an empty queue
  std::vector<int32_t> decoded_row_groups;  // catalog indices, in decode order
  int64_t peak_live_row_groups = 0;         // most decoded row groups held at once
  // The memory budget (EngineOptions::memory_limit), in bytes.
  int64_t memory_limit = 0;              // 0: none
  int64_t memory_peak = 0;               // most bytes booked at once
  int64_t memory_used = 0;               // bytes booked now
  int64_t memory_peak_decoding = 0;      // ... reserved for row groups being decoded
  int64_t memory_peak_decoded = 0;       // ... held by decoded row groups
  int64_t memory_peak_batches = 0;       // ... held by built batches not yet taken
  int64_t memory_peak_idle = 0;          // ... freed stack matrices kept for reuse
  int64_t memory_peak_together = 0;      // most booked at once by all engines of its leftovers
  int64_t matrices_reused = 0;           // stack matrices taken from those kept
  int64_t matrices_allocated = 0;        // ... and allocated
  int64_t matrices_prefaulted = 0;       // made and written before the first batch
  int64_t batch_buffers_reused = 0;      // batch buffers taken from those the consumer dropped
  int64_t batch_buffers_allocated = 0;   // ... and allocated (both 0 with an output_arena)
  int64_t batch_buffers_prefaulted = 0;  // made and written before the first batch
  int64_t memory_waits = 0;              // decodes that waited for room
  double memory_wait_seconds = 0;        // how long they waited
  int64_t memory_over_limit = 0;         // decodes for the next batch that went past the limit
  int64_t ready_batches_capacity = 0;    // built batches kept at most
};

// What an engine with these settings holds and how well it mixes, from the
// footers alone: for `shardfeed info` and for the default shuffle window.
struct MemoryPlan {
  int64_t window_row_groups = 0;    // the window (chosen here when asked for 0)
  int64_t row_group_bytes = 0;      // mean decoded bytes of a row group (footer sizes)
  int64_t max_row_group_bytes = 0;  // the largest
  int64_t batch_bytes = 0;          // one batch, estimated from the mean row
  int64_t ready_batches = 0;        // built batches kept at most
  int64_t expected_peak_bytes = 0;  // what stats' memory peak should come to
  int64_t floor_bytes = 0;          // the least any limit can give: a window and one decode
  // What an engine holds by the time its ready batches are full: its first
  // window, a decode per thread and the ready batches.
  int64_t start_bytes = 0;
  double expected_mixing = 1;  // expected W_eff: 1 / P(two rows of a batch share a row group)
  // The memory_limit whose default window is kMixingTarget row groups (all of
  // them when there are fewer): what `shardfeed info` suggests when batches
  // mix fewer.  0 for an empty dataset.
  int64_t limit_for_target_window = 0;
  static constexpr int64_t kMixingTarget = 16;
};

// `row_group_rows`: the rows of each catalog row group that the plan sees
// (after a filter).  plan.window_row_groups == 0 asks for the default
// window: the most row groups (at least 1, at most all) whose decoded bytes
// fill 3/8 of engine.memory_limit, so that the window being read and the
// next one being decoded take 3/4 of it and the rest is left for decodes in
// flight and ready batches; 4 without a limit.  A pure function of the
// footers and the settings, so the order it leads to is too.
arrow::Result<MemoryPlan> PlanMemory(const std::shared_ptr<const Catalog>& catalog,
                                     std::span<const int64_t> row_group_rows,
                                     const PlanOptions& plan, const EngineOptions& engine);

class Engine {
 public:
  static arrow::Result<std::unique_ptr<Engine>> Make(std::shared_ptr<const Catalog> catalog,
                                                     std::shared_ptr<const EpochPlan> plan,
                                                     const EngineOptions& options);
  virtual ~Engine() = default;

  // The next batch in order, nullptr after the last one.  Blocks.  After an
  // error every later call returns the same error.
  virtual arrow::Result<std::shared_ptr<Batch>> Next() = 0;
  // Like Next(), but returns after at most `wait` with *timed_out set (and no
  // batch) when none is ready: the binding waits in such slices so that it can
  // act on Ctrl-C.  A later call picks up where this one left off.
  virtual arrow::Result<std::shared_ptr<Batch>> NextWithin(std::chrono::milliseconds wait,
                                                           bool* timed_out) = 0;
  // Stops and joins the workers; idempotent.  Next() then returns Cancelled.
  virtual void Stop() = 0;
  // Tells the workers to stop without waiting for them (Ctrl-C: a worker may be
  // inside a long read); Next() then returns Cancelled.  Stop() or the
  // destructor joins them.
  virtual void Cancel() = 0;
  virtual int64_t num_units() const = 0;
  // Bytes held now: booked in the memory budget and idle (kept for reuse).
  virtual int64_t memory_held() const = 0;
  // Every row group of the last window its units read (a rank's slice may end
  // before the epoch's last window) has begun to decode: from now on the
  // engine books no more memory for decodes, it only gives it back.
  virtual bool decodes_started() const = 0;
  virtual EngineStats stats() const = 0;
  virtual std::vector<TraceRecord> trace() const = 0;
};

// Threads started by engines in this process (workers and prefetchers) that
// have not returned yet; 0 once every engine is stopped (for tests).
int64_t LiveEngineThreads();

// Waits until no remote call that its caller gave up at remote_timeout still
// runs (a filesystem being made, a read), or `seconds` pass; whether none
// runs.  For the exit hook: pyarrow's S3 shutdown tears the AWS SDK down
// under such a call.
bool WaitForAbandonedRemoteCalls(double seconds);

}  // namespace shardfeed
