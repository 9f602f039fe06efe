// A stack's row-major matrix for one decoded row group (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "exec/assemble.h"
#include "exec/matrix_pool.h"
#include "transform/column.h"
#include "transform/layout.h"
#include "transform/transform.h"

namespace shardfeed {

// The member columns of stack `plan` transposed into a [rows, width] matrix of
// plan.matrix_dtype (a column of fixed-size lists that owns its buffer), with
// the nulls the stack's FillNull takes filled.  Its buffer comes from `pool`
// when given (matrix_pool.h), else from the engine's allocator.
arrow::Result<DecodedColumn> MakeStackMatrix(const Layout& layout, const OutputPlan& plan,
                                             const std::vector<DecodedColumn>& columns,
                                             int64_t rows, MatrixPool* pool = nullptr);

// The same in parts: a matrix not yet written, then members [first, last)
// written into it from their columns (decode reads a large row group's
// stack a few columns at a time: see FusedStacks).
arrow::Result<DecodedColumn> NewStackMatrix(const OutputPlan& plan, int64_t rows,
                                            MatrixPool* pool = nullptr);
arrow::Status FillStackMembers(const Layout& layout, const OutputPlan& plan,
                               const std::vector<DecodedColumn>& columns, int64_t rows,
                               size_t first, size_t last, DecodedColumn* matrix);

// Per Layout::outputs: the stacks whose members feed nothing else and have no
// random transform, so that their columns can be read, transformed and
// written into the matrix a few at a time (never all held at once) and the
// matrix is what the decoded tier stores (tier_entry.h).  Decode fuses them
// in row groups too large to pre-buffer (footprint.h: PreBuffered).
std::vector<bool> FusedStacks(const Layout& layout);
// (kFusedColumns, the members of a fused stack read at a time: assemble.h.)

// The stack's own transforms, in list order, on its matrix (see ApplyTransform
// for first_row and selected).  Errors name the transform.
arrow::Status TransformStack(const Layout& layout, const OutputPlan& plan, const RandomKey& key,
                             int64_t first_row, int64_t rows, const std::vector<int64_t>* selected,
                             DecodedColumn* matrix);

}  // namespace shardfeed
