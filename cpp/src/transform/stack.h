// Transforms on a stack's [rows, F] matrix, with settings per feature (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/transform.h"
#include "transform/column.h"
#include "transform/transform.h"

namespace shardfeed {

// Checks transform `t` on the stack `stack` of the columns `features` (its
// per-feature settings, when given, must have one value per feature) and
// gives the matrix's dtype after it.  Errors name the stack, and the feature
// whose setting is wrong.
arrow::Result<DType> StackTransformedType(const TransformSpec& t, DType in,
                                          const std::string& stack,
                                          const std::vector<std::string>& features);

// The values of a stack's FillNull, one per feature, each checked to fit the
// matrix's dtype `dtype`.
arrow::Result<std::vector<double>> StackFillValues(const TransformSpec& t, DType dtype,
                                                   const std::string& stack,
                                                   const std::vector<std::string>& features);

// Applies transform number `position` to a stack's matrix, given as a column
// of fixed-size lists (list_size = F).  A random transform draws all of row
// r's values, in feature order, from the one stream of RowId(first_row,
// selected, r).
arrow::Status ApplyStackTransform(const TransformSpec& t, size_t position, const RandomKey& key,
                                  int64_t first_row, int64_t rows, DecodedColumn* matrix,
                                  const std::vector<int64_t>* selected = nullptr);

}  // namespace shardfeed
