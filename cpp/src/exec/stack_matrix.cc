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

// Writes fill[c] where member c (first <= c < last) is null.
void FillNulls(const OutputPlan& plan, const std::vector<DecodedColumn>& columns, int64_t rows,
               size_t first, size_t last, uint8_t* matrix) {
  VisitDType(plan.matrix_dtype, [&](auto z) {
    using T = decltype(z);
    auto* x = reinterpret_cast<T*>(matrix);
    for (size_t c = first; c < last; ++c) {
      const auto& nulls = columns[static_cast<size_t>(plan.sources[c])].nulls;
      if (nulls.empty()) continue;
      const T value = StoredValue<T>(plan.matrix_dtype, plan.fill[c]);
      for (int64_t r = 0; r < rows; ++r) {
        if (nulls[static_cast<size_t>(r)]) x[r * plan.width + static_cast<int64_t>(c)] = value;
      }
    }
  });
}

}  // namespace

arrow::Result<DecodedColumn> NewStackMatrix(const OutputPlan& plan, int64_t rows,
                                            MatrixPool* pool) {
  DecodedColumn m;
  m.dtype = plan.matrix_dtype;
  m.count = rows * plan.width;
  m.list_size = plan.width;
  const auto bytes = m.count * static_cast<int64_t>(DTypeSize(m.dtype));
  if (pool != nullptr) {
    ARROW_ASSIGN_OR_RAISE(m.owned, pool->Take(bytes));
  } else {
    ARROW_ASSIGN_OR_RAISE(m.owned,
                          arrow::AllocateBuffer(std::max<int64_t>(bytes, 1), EnginePool()));
  }
  m.values = m.owned->data();
  return m;
}

arrow::Status FillStackMembers(const Layout& layout, const OutputPlan& plan,
                               const std::vector<DecodedColumn>& columns, int64_t rows,
                               size_t first, size_t last, DecodedColumn* matrix) {
  last = std::min(last, plan.sources.size());
  auto* out = matrix->owned->mutable_data();
  ARROW_RETURN_NOT_OK(TransposeStack(layout, plan, columns, rows, out, first, last));
  if (!plan.fill.empty()) FillNulls(plan, columns, rows, first, last, out);
  return arrow::Status::OK();
}

arrow::Result<DecodedColumn> MakeStackMatrix(const Layout& layout, const OutputPlan& plan,
                                             const std::vector<DecodedColumn>& columns,
                                             int64_t rows, MatrixPool* pool) {
  ARROW_ASSIGN_OR_RAISE(DecodedColumn m, NewStackMatrix(plan, rows, pool));
  ARROW_RETURN_NOT_OK(FillStackMembers(layout, plan, columns, rows, 0, plan.sources.size(), &m));
  return m;
}

std::vector<bool> FusedStacks(const Layout& layout) {
  std::vector<int> stacks_of(layout.fields.size(), 0);
  for (const auto& plan : layout.outputs) {
    if (plan.kind != OutputKind::kStack) continue;
    for (int s : plan.sources) ++stacks_of[static_cast<size_t>(s)];
  }
  std::vector<bool> fused(layout.outputs.size(), false);
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    if (plan.kind != OutputKind::kStack || !MembersDeterministic(layout, plan)) continue;
    bool ok = true;
    for (int s : plan.sources) {
      const auto f = static_cast<size_t>(s);
      ok = ok && !layout.field_used_alone[f] && stacks_of[f] == 1;
    }
    fused[o] = ok;
  }
  return fused;
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
