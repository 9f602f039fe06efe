#include "exec/tier_entry.h"

#include <algorithm>
#include <sstream>

#include "shardfeed/status.h"
#include "tier/decoded_tier_internal.h"

namespace shardfeed {

namespace {

// Whether field `i`'s column as the tier stores it (after the deterministic
// prefix of its transforms) has the type and shape of `rows` rows.
bool FitsField(const DecodedColumn& c, const Layout& layout, size_t i, int64_t rows) {
  DType dtype = layout.field_raw_dtypes[i];
  bool strings = layout.field_from_strings[i];
  for (size_t k = 0; k < DeterministicPrefix(layout, i); ++k) {
    const auto& t = layout.transforms[layout.field_transforms[i][k]];
    auto next = TransformedType(t, dtype, layout.field_shapes[i], strings);
    if (!next.ok()) return false;
    dtype = *next;
    strings = false;
  }
  int64_t elements = 0;
  if (c.dtype != dtype) return false;
  switch (layout.field_shapes[i]) {
    case ColumnShape::kScalar:
      return c.list_size == 0 && c.list_starts.empty() && c.count == rows;
    case ColumnShape::kFixedList:
      return c.list_size > 0 && c.list_starts.empty() &&
             !__builtin_mul_overflow(rows, c.list_size, &elements) && c.count == elements;
    case ColumnShape::kList:
      return c.list_size == 0 && c.list_starts.size() == static_cast<size_t>(rows);
  }
  return false;
}

// Whether a stored matrix is stack `plan`'s for `rows` rows: dense, of its
// dtype and width.
bool FitsMatrix(const DecodedColumn& c, const OutputPlan& plan, int64_t rows) {
  int64_t elements = 0;
  return c.dtype == plan.matrix_dtype && !c.from_strings && c.list_size == plan.width &&
         plan.width > 0 && c.list_starts.empty() && !c.has_nulls() && !c.null_rows &&
         !__builtin_mul_overflow(rows, plan.width, &elements) && c.count == elements;
}

}  // namespace

bool TierEntryPlan::any_matrix() const {
  return std::find(matrix_stored.begin(), matrix_stored.end(), true) != matrix_stored.end();
}

TierEntryPlan PlanTierEntry(const Layout& layout) {
  TierEntryPlan entry;
  entry.column_stored.assign(layout.fields.size(), false);
  entry.matrix_stored.assign(layout.outputs.size(), false);
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    entry.matrix_stored[o] = plan.kind == OutputKind::kStack && MembersDeterministic(layout, plan);
  }
  // A column is stored when something other than a stored matrix reads it.
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    entry.column_stored[i] = layout.field_used_alone[i];
  }
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    if (plan.kind != OutputKind::kStack || entry.matrix_stored[o]) continue;
    for (int s : plan.sources) entry.column_stored[static_cast<size_t>(s)] = true;
  }
  if (!entry.any_matrix()) {
    // The columns alone, as before matrices were stored: the same keys.
    entry.column_stored.assign(layout.fields.size(), true);
    return entry;
  }
  std::ostringstream key;
  key.precision(17);
  key << "|columns:";
  for (bool stored : entry.column_stored) key << (stored ? '1' : '0');
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    if (!entry.matrix_stored[o]) continue;
    const auto& plan = layout.outputs[o];
    key << "|matrix:" << plan.name << ':' << DTypeName(plan.matrix_dtype) << ':' << plan.width;
    for (int s : plan.sources) {
      const auto f = static_cast<size_t>(s);
      key << ';' << layout.field_names[f] << (layout.field_nulls_to_stack[f] ? "/stack" : "");
      if (layout.field_fill_null[f]) key << "/fill=" << *layout.field_fill_null[f];
    }
    key << ";fill";
    for (double v : plan.fill) key << ',' << v;
  }
  entry.key_suffix = key.str();
  return entry;
}

std::vector<DecodedColumn> EntryRecords(const TierEntryPlan& entry,
                                        const std::vector<DecodedColumn>& columns,
                                        const std::vector<DecodedColumn>& matrices) {
  std::vector<DecodedColumn> records;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (entry.column_stored[i]) records.push_back(columns[i]);
  }
  for (size_t o = 0; o < matrices.size(); ++o) {
    if (entry.matrix_stored[o]) records.push_back(matrices[o]);
  }
  return records;
}

bool TakeEntryRecords(std::vector<DecodedColumn>* loaded, const Layout& layout,
                      const TierEntryPlan& entry, int64_t rows, std::vector<DecodedColumn>* columns,
                      std::vector<DecodedColumn>* matrices) {
  const auto stored_columns =
      std::count(entry.column_stored.begin(), entry.column_stored.end(), true);
  const auto stored_matrices =
      std::count(entry.matrix_stored.begin(), entry.matrix_stored.end(), true);
  if (loaded->size() != static_cast<size_t>(stored_columns + stored_matrices)) return false;
  size_t k = 0;
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (entry.column_stored[i] && !FitsField((*loaded)[k++], layout, i, rows)) return false;
  }
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    if (entry.matrix_stored[o] && !FitsMatrix((*loaded)[k++], layout.outputs[o], rows)) {
      return false;
    }
  }
  columns->assign(layout.fields.size(), DecodedColumn{});
  matrices->assign(layout.outputs.size(), DecodedColumn{});
  k = 0;
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (entry.column_stored[i]) (*columns)[i] = std::move((*loaded)[k++]);
  }
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    if (entry.matrix_stored[o]) (*matrices)[o] = std::move((*loaded)[k++]);
  }
  return true;
}

void MarkMapped(const std::string& path, uint64_t mark, const std::vector<DecodedColumn>& columns,
                const std::vector<DecodedColumn>& matrices, DecodedRowGroup* decoded) {
  for (const auto* records : {&columns, &matrices}) {
    for (const auto& c : *records) {
      if (auto flag = DamageFlagOf(c.owned, &decoded->mapped_bytes)) {
        decoded->mapped_damage = std::move(flag);
        decoded->mapped_path = path;
        decoded->mapped_mark = mark;
        return;  // one entry per row group
      }
    }
  }
}

void SeeTierChanges(DecodedTier* tier) {
  if (tier) tier->impl()->changes_->Mark();
}

arrow::Status MappedIntact(const DecodedRowGroup& decoded, const std::string& context,
                           DecodedTier* tier, bool check_size) {
  if (!decoded.mapped_damage) return arrow::Status::OK();  // not mapped
  const bool changed =
      tier && tier->impl()->changes_->ChangedSince(decoded.mapped_path, decoded.mapped_mark,
                                                   decoded.mapped_bytes, check_size);
  if (!changed && !decoded.mapped_damage->load()) return arrow::Status::OK();
  if (tier) tier->impl()->RemoveDamaged(decoded.mapped_path, decoded.mapped_bytes);
  return Error(ErrorKind::kStorage,
               context + ": its decoded cache entry '" + decoded.mapped_path +
                   "' lost pages while it was read (truncated in place by another program, "
                   "or a read error of the disk beneath it); the entry was removed and the "
                   "row group is decoded again from the next epoch on. Nothing read from "
                   "it was delivered: resume from the loader's state_dict()");
}

}  // namespace shardfeed
