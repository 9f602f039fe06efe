#include "exec/tier_entry.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

namespace shardfeed {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("a", arrow::float32()), arrow::field("b", arrow::float32()),
                        arrow::field("c", arrow::float32()), arrow::field("id", arrow::int64())});
}

Layout LayoutWith(std::vector<TransformSpec> transforms) {
  OutputOptions o;
  o.columns = {"id", "c"};
  o.all_columns = false;
  o.stacks = {StackSpec{"x", {"a", "b", "c"}}};
  o.transforms = std::move(transforms);
  return MakeLayout(*Schema(), o).ValueOrDie();
}

TransformSpec Op(TransformOp op, const std::string& column) {
  TransformSpec t;
  t.op = op;
  t.column = column;
  t.a = 1;
  t.b = 2;
  return t;
}

DecodedColumn Dense(DType dtype, int64_t count, int64_t list_size) {
  DecodedColumn c;
  c.dtype = dtype;
  c.count = count;
  c.list_size = list_size;
  return c;
}

TEST(TierEntry, AStackWithoutRandomMembersIsStoredAsItsMatrix) {
  const Layout layout = LayoutWith({Op(TransformOp::kStandardize, "a")});
  const TierEntryPlan entry = PlanTierEntry(layout);
  ASSERT_TRUE(entry.any_matrix());
  EXPECT_FALSE(entry.key_suffix.empty());
  // Only "id" and "c" (read alone too) are stored as columns; "a" and "b" only feed the matrix.
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    EXPECT_EQ(entry.column_stored[i], layout.field_used_alone[i]) << layout.field_names[i];
  }
  // A random member: the columns, as before, and the same key as without stacks.
  const Layout noisy = LayoutWith({Op(TransformOp::kGaussianNoise, "b")});
  const TierEntryPlan columns = PlanTierEntry(noisy);
  EXPECT_FALSE(columns.any_matrix());
  EXPECT_TRUE(columns.key_suffix.empty());
  for (bool stored : columns.column_stored) EXPECT_TRUE(stored);
  // Settings the matrix depends on change the key.
  TransformSpec other = Op(TransformOp::kStandardize, "a");
  other.b = 3;
  EXPECT_EQ(PlanTierEntry(LayoutWith({other})).key_suffix, entry.key_suffix);  // in Key()
  OutputOptions wider;
  wider.columns = {"id", "c"};
  wider.all_columns = false;
  wider.stacks = {StackSpec{"x", {"a", "b", "c", "id"}}};
  EXPECT_NE(PlanTierEntry(MakeLayout(*Schema(), wider).ValueOrDie()).key_suffix, entry.key_suffix);
}

TEST(TierEntry, LoadedRecordsMustHaveTheStoredShapes) {
  const Layout layout = LayoutWith({});
  const TierEntryPlan entry = PlanTierEntry(layout);
  const int64_t rows = 10;
  size_t stack = 0;
  while (layout.outputs[stack].kind != OutputKind::kStack) ++stack;
  const DType matrix_dtype = layout.outputs[stack].matrix_dtype;
  auto good = [&] {
    std::vector<DecodedColumn> records;
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      if (entry.column_stored[i]) records.push_back(Dense(layout.field_raw_dtypes[i], rows, 0));
    }
    records.push_back(Dense(matrix_dtype, rows * 3, 3));
    return records;
  };
  std::vector<DecodedColumn> columns, matrices;
  auto records = good();
  ASSERT_TRUE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
  EXPECT_EQ(columns.size(), layout.fields.size());
  ASSERT_EQ(matrices.size(), layout.outputs.size());
  EXPECT_EQ(matrices[stack].list_size, 3);
  EXPECT_EQ(matrices[stack].count, 30);

  records = good();  // another row count
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows + 1, &columns, &matrices));
  records = good();  // a matrix of another width
  records.back() = Dense(matrix_dtype, rows * 2, 2);
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
  records = good();  // a matrix of another dtype
  records.back() = Dense(DType::kFloat64, rows * 3, 3);
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
  records = good();  // a matrix with nulls
  records.back().nulls.assign(static_cast<size_t>(rows * 3), 0);
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
  records = good();  // a record missing
  records.pop_back();
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
  records = good();  // a column of another type
  records.front() = Dense(DType::kInt8, rows, 0);
  EXPECT_FALSE(TakeEntryRecords(&records, layout, entry, rows, &columns, &matrices));
}

}  // namespace
}  // namespace shardfeed
