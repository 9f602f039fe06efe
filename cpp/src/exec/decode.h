// Decoding one row group into flat column views (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "exec/layout.h"
#include "shardfeed/catalog.h"

namespace shardfeed {

// One decoded column of one row group, normalized for gathering: `values`
// points at the element type of the layout (bools as one byte each), nulls
// already replaced by the fill value.
struct DecodedColumn {
  const uint8_t* values = nullptr;       // row 0 (lists: child value 0)
  int64_t list_size = 0;                 // fixed-size lists
  std::vector<int64_t> list_starts;      // variable-length lists: first child value of each row
  std::vector<int64_t> list_lengths;     // variable-length lists: length of each row (null: 0)
  std::shared_ptr<arrow::Buffer> owned;  // a normalized copy, when one was needed
  std::shared_ptr<arrow::Array> array;   // keeps the decoded data alive
};

struct DecodedRowGroup {
  int32_t index = 0;      // catalog row-group index
  int64_t first_row = 0;  // global id of row 0
  int64_t num_rows = 0;
  int64_t bytes = 0;                   // compressed bytes read
  std::vector<DecodedColumn> columns;  // one per Layout::fields
  // Per Layout::outputs entry: the row-major matrix of a stack, else null.
  std::vector<std::shared_ptr<arrow::Buffer>> stacks;
};

// Reads and normalizes row group `rg_index` of the catalog.  Every error names
// the file and row group, and the column when one can be singled out.
arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroup(const Catalog& catalog,
                                                                     int32_t rg_index,
                                                                     const Layout& layout);

}  // namespace shardfeed
