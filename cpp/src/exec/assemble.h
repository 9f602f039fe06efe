// Assembling a batch from decoded row groups (internal): one gather per output,
// straight into the buffer that Python will see.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "exec/decoded_row_group.h"
#include "shardfeed/batch.h"
#include "transform/layout.h"

namespace shardfeed {

struct GatherInput {
  std::vector<const DecodedRowGroup*> slots;  // the row groups this batch touches
  std::vector<int32_t> slot;                  // per sample: index into `slots`
  std::vector<int64_t> row;                   // per sample: row inside that row group
};

// Members of a fused stack read at a time (stack_matrix.h: FusedStacks), and
// the slab width TransposeStack writes with streaming stores into a large
// matrix.
inline constexpr size_t kFusedColumns = 16;

// Writes the stack `plan` of one decoded row group as a row-major [rows, width]
// matrix of the stack's dtype before its own transforms (matrix_dtype) into `out`, so that
// gathering a shuffled batch copies one contiguous row per sample instead of touching `width`
// columns.  Only members [first, last) of the stack (their columns must be
// there; the others' are not read).  `out` may be a part of a larger matrix
// (rows of a tile: tile_read.h) whose size in rows, `matrix_rows` (default:
// rows), decides whether streaming stores pay.
arrow::Status TransposeStack(const Layout& layout, const OutputPlan& plan,
                             const std::vector<DecodedColumn>& columns, int64_t rows, uint8_t* out,
                             size_t first = 0, size_t last = SIZE_MAX, int64_t matrix_rows = -1);

// What a batch may take.  A variable-length list output is padded to its
// longest list: one long list (a damaged or unusual row) makes every row as
// long, so with a memory limit an output that alone exceeds it (and 16 MiB),
// and is mostly padding (8 times its values), is refused, naming the longest
// list, rather than allocated.
struct AssembleLimits {
  int64_t memory_limit = 0;  // 0: none
  // "file '...', row group N" for a catalog row-group index (null: "row group N").
  std::function<std::string(int32_t)> row_group_name;
};

// Buffers come from `arena` when it has room (see OutputBuffer::Make).
arrow::Result<std::shared_ptr<Batch>> Assemble(const Layout& layout, const GatherInput& input,
                                               int64_t batch_index,
                                               const std::shared_ptr<OutputArena>& arena = nullptr,
                                               const AssembleLimits& limits = {});

}  // namespace shardfeed
