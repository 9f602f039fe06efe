#include "exec/stack_matrix.h"

#include <algorithm>

#include <arrow/buffer.h>

#include "exec/assemble.h"
#include "shardfeed/status.h"
#include "transform/stack.h"
#include "util/dtype_dispatch.h"
#include "util/memory.h"

namespace shardfeed {

namespace {

// Writes fill[c] where member c is null.
void FillNulls(const OutputPlan& plan, const std::vector<DecodedColumn>& columns, int64_t rows,
               uint8_t* matrix) {
  VisitDType(plan.matrix_dtype, [&](auto z) {
    using T = decltype(z);
    auto* x = reinterpret_cast<T*>(matrix);
    for (size_t c = 0; c < plan.sources.size(); ++c) {
      const auto& nulls = columns[static_cast<size_t>(plan.sources[c])].nulls;
      if (nulls.empty()) continue;
      const T value = plan.matrix_dtype == DType::kBool ? T(plan.fill[c] != 0 ? 1 : 0)
                                                        : SaturatingCast<T>(plan.fill[c]);
      for (int64_t r = 0; r < rows; ++r) {
        if (nulls[static_cast<size_t>(r)]) x[r * plan.width + static_cast<int64_t>(c)] = value;
      }
    }
  });
}

}  // namespace

arrow::Result<DecodedColumn> MakeStackMatrix(const Layout& layout, const OutputPlan& plan,
                                             const std::vector<DecodedColumn>& columns,
                                             int64_t rows) {
  DecodedColumn m;
  m.dtype = plan.matrix_dtype;
  m.count = rows * plan.width;
  m.list_size = plan.width;
  const auto bytes = m.count * static_cast<int64_t>(DTypeSize(m.dtype));
  ARROW_ASSIGN_OR_RAISE(m.owned, arrow::AllocateBuffer(std::max<int64_t>(bytes, 1), EnginePool()));
  m.values = m.owned->data();
  auto* out = m.owned->mutable_data();
  ARROW_RETURN_NOT_OK(TransposeStack(layout, plan, columns, rows, out));
  if (!plan.fill.empty()) FillNulls(plan, columns, rows, out);
  return m;
}

arrow::Status TransformStack(const Layout& layout, const OutputPlan& plan, const RandomKey& key,
                             int64_t first_row, int64_t rows, const std::vector<int64_t>* selected,
                             DecodedColumn* matrix) {
  for (size_t t : plan.transforms) {
    const auto& spec = layout.transforms[t];
    ARROW_RETURN_NOT_OK(
        WithContext(ApplyStackTransform(spec, t, key, first_row, rows, matrix, selected),
                    TransformOpName(spec.op)));
  }
  return arrow::Status::OK();
}

}  // namespace shardfeed
