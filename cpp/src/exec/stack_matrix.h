// A stack's row-major matrix for one decoded row group (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "transform/column.h"
#include "transform/layout.h"
#include "transform/transform.h"

namespace shardfeed {

// The member columns of stack `plan` transposed into a [rows, width] matrix of
// plan.matrix_dtype (a column of fixed-size lists that owns its buffer), with
// the nulls the stack's FillNull takes filled.
arrow::Result<DecodedColumn> MakeStackMatrix(const Layout& layout, const OutputPlan& plan,
                                             const std::vector<DecodedColumn>& columns,
                                             int64_t rows);

// The stack's own transforms, in list order, on its matrix (see ApplyTransform
// for first_row and selected).  Errors name the transform.
arrow::Status TransformStack(const Layout& layout, const OutputPlan& plan, const RandomKey& key,
                             int64_t first_row, int64_t rows, const std::vector<int64_t>* selected,
                             DecodedColumn* matrix);

}  // namespace shardfeed
