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
  // Where batch buffers come from (null: the engine's pool).  Python:
  // pin_memory=True gives page-locked slabs.
  std::shared_ptr<OutputArena> output_arena;
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
  int64_t batches = 0;
  int64_t rows_delivered = 0;
  int threads = 0;
  double elapsed_seconds = 0;               // since the engine started
  std::vector<StageStats> stages;           // busy time of the workers, per stage
  double worker_wait_seconds = 0;           // workers blocked on a full queue
  double consumer_wait_seconds = 0;         // consumer blocked on an empty queue
  std::vector<int32_t> decoded_row_groups;  // catalog indices, in decode order
  int64_t peak_live_row_groups = 0;         // most decoded row groups held at once
};

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
  virtual EngineStats stats() const = 0;
  virtual std::vector<TraceRecord> trace() const = 0;
};

// Threads started by engines in this process (workers and prefetchers) that
// have not returned yet; 0 once every engine is stopped (for tests).
int64_t LiveEngineThreads();

}  // namespace shardfeed
