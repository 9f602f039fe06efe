// Type rules and execution of push-down transforms (internal).
#pragma once

#include <cstdint>
#include <string>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/transform.h"
#include "transform/column.h"

namespace shardfeed {

enum class ColumnShape { kScalar, kFixedList, kList };

// The element type after `t`, given the type before it; checks the settings.
// Every error names the transform and the column.
arrow::Result<DType> TransformedType(const TransformSpec& t, DType in, ColumnShape shape,
                                     bool from_strings);

// OK when `value` is a value of `dtype`: for integers an integer in range,
// for bool 0 or 1, for floats any number in range (rounded to the nearest)
// or NaN; else InvalidArgument "<what>: ...".
arrow::Status CheckFillValue(double value, DType dtype, const std::string& what);

struct RandomKey {
  uint64_t seed = 0;
  uint64_t epoch = 0;
};

// Applies transform number `position` of the list to one row group's column.
// `first_row` is the natural-order id of row 0 (random transforms key on it);
// with `selected` (the rows a filter kept), row r's id is first_row + (*selected)[r],
// so a sample's augmentation does not depend on the filter.
arrow::Status ApplyTransform(const TransformSpec& t, size_t position, const RandomKey& key,
                             int64_t first_row, int64_t rows, DecodedColumn* column,
                             const std::vector<int64_t>* selected = nullptr);

}  // namespace shardfeed
