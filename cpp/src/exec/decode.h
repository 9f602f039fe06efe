// Decoding one row group into flat column views (internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "exec/decoded_row_group.h"
#include "exec/matrix_pool.h"
#include "exec/shared_work.h"
#include "exec/stage_clock.h"
#include "shardfeed/catalog.h"
#include "shardfeed/decoded_tier.h"
#include "shardfeed/filter.h"
#include "storage/open.h"
#include "transform/column.h"
#include "transform/layout.h"
#include "transform/transform.h"

namespace shardfeed {

// How DecodeRowGroup opens files and where it books its time.
struct DecodeHooks {
  std::shared_ptr<StageClock> clock;  // required
  // Opens a catalog file; empty: the catalog's filesystem (storage/open.h).
  FileOpener open;
  Stage io_stage = Stage::kRead;         // kFetch when the bytes come from remote storage
  std::shared_ptr<DecodedTier> tier;     // the decoded cache tier, when enabled
  std::shared_ptr<MatrixPool> matrices;  // stack matrices reused; empty: allocated
  // With a tier: a row group decoded and stored is then mapped from its entry
  // (shuffle="global" holds every row group at once: the page cache's pages,
  // not the engine's memory).
  bool map_stored = false;
  // With map_stored: the engine's memory_limit (0: none).  A row group the tier
  // cannot store would then stay in memory, every one of them at once: past a
  // limit that is an error rather than an unbounded epoch.
  int64_t memory_limit = 0;
  std::shared_ptr<const FilteredRows> filter;  // keeps only the passing rows
  std::string slow_stage;                      // test hook: sleep slow_us in this stage
  int slow_us = 0;
  double remote_timeout = 0;                // seconds for one row group's remote reads; 0: none
  bool verify_page_checksums = false;       // EngineOptions::verify_page_checksums
  const std::atomic<bool>* stop = nullptr;  // the engine's: ends a remote wait early
  // While another process holds a tier entry this decode needs: decode
  // something else meanwhile (true if it did).  Empty: wait.
  std::function<bool()> help;
  // Offers parts of this decode to the workers waiting for its row group
  // (shared_work.h).  Empty: this worker runs them all.
  std::function<void(std::shared_ptr<SharedWork>)> share;
};

// Reads and normalizes row group `rg_index` of the catalog.  Every error names
// the file and row group, and the column when one can be singled out.
arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroup(const Catalog& catalog,
                                                                     int32_t rg_index,
                                                                     const Layout& layout,
                                                                     const RandomKey& key,
                                                                     const DecodeHooks& hooks);

}  // namespace shardfeed
