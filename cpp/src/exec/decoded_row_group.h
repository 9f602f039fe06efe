// One decoded row group: what decoding produces and assembling reads
// (internal).  Its own header so that decode and assemble do not include each
// other: decode uses assemble's TransposeStack, assemble only reads this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "transform/column.h"
#include "util/watched_map.h"

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
  // From the decoded tier, mapped: the entry's damage flag (watched_map.h),
  // path and size.  Whoever reads the row group checks the flag, and changes
  // in place since the mark, after reading (MappedIntact, tier_entry.h).
  DamageFlag mapped_damage;
  std::string mapped_path;
  int64_t mapped_bytes = 0;
  uint64_t mapped_mark = 0;  // the tier's EntryChanges mark before it was mapped
};

}  // namespace shardfeed
