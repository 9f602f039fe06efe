// Keeping a filter's rows of a decoded table (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/result.h>
#include <arrow/table.h>

namespace shardfeed {

// The table's rows `rows` (ascending indices), in that order.  Arrow has no
// take kernel for string_view and binary_view (what delta-rs and polars
// write), so such columns, also as list or struct members, are first cast to
// string and binary, as the engine delivers them anyway.
arrow::Result<std::shared_ptr<arrow::Table>> TakeRows(std::shared_ptr<arrow::Table> table,
                                                      const std::vector<int64_t>& rows);

}  // namespace shardfeed
