// Assembling a batch from decoded row groups (internal): one gather per output,
// straight into the buffer that Python will see.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/result.h>

#include "exec/decode.h"
#include "exec/layout.h"
#include "shardfeed/batch.h"

namespace shardfeed {

struct GatherInput {
  std::vector<const DecodedRowGroup*> slots;  // the row groups this batch touches
  std::vector<int32_t> slot;                  // per sample: index into `slots`
  std::vector<int64_t> row;                   // per sample: row inside that row group
};

arrow::Result<std::shared_ptr<Batch>> Assemble(const Layout& layout, const GatherInput& input,
                                               int64_t batch_index);

}  // namespace shardfeed
