// Decoding one row group into flat column views (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "exec/layout.h"
#include "exec/stage_clock.h"
#include "shardfeed/catalog.h"
#include "shardfeed/filter.h"
#include "tier/decoded_tier.h"
#include "transform/column.h"
#include "transform/transform.h"

namespace shardfeed {

struct DecodedRowGroup {
  int32_t index = 0;      // catalog row-group index
  int64_t first_row = 0;  // global id of row 0
  int64_t num_rows = 0;
  // With a filter: row i is row (*rows)[i] of the row group (its sample id is
  // first_row + that); null: row i is row i.
  std::shared_ptr<const std::vector<int64_t>> rows;
  int64_t bytes = 0;                   // compressed bytes read
  std::vector<DecodedColumn> columns;  // one per Layout::fields
  // Per Layout::outputs entry: the row-major matrix of a stack, else null.
  std::vector<std::shared_ptr<arrow::Buffer>> stacks;
};

// How DecodeRowGroup opens files and where it books its time.
struct DecodeHooks {
  std::shared_ptr<StageClock> clock;  // required
  // Opens a catalog file; empty: the catalog's filesystem directly.
  std::function<arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>>(int32_t file)> open;
  Stage io_stage = Stage::kRead;               // kFetch when the bytes come from remote storage
  std::shared_ptr<DecodedTier> tier;           // the decoded cache tier, when enabled
  std::shared_ptr<const FilteredRows> filter;  // keeps only the passing rows
  std::string slow_stage;                      // test hook: sleep slow_us in this stage
  int slow_us = 0;
};

// Reads and normalizes row group `rg_index` of the catalog.  Every error names
// the file and row group, and the column when one can be singled out.
arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroup(const Catalog& catalog,
                                                                     int32_t rg_index,
                                                                     const Layout& layout,
                                                                     const RandomKey& key,
                                                                     const DecodeHooks& hooks);

}  // namespace shardfeed
