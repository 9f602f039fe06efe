#include "transform/layout.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

std::shared_ptr<arrow::Schema> TestSchema() {
  return arrow::schema({
      arrow::field("id", arrow::int64()),
      arrow::field("x", arrow::float32()),
      arrow::field("y", arrow::float64()),
      arrow::field("v", arrow::fixed_size_list(arrow::float32(), 3)),
      arrow::field("seq", arrow::list(arrow::int32())),
      arrow::field("name", arrow::utf8()),
  });
}

TransformSpec Spec(TransformOp op, const std::string& column) {
  TransformSpec t;
  t.op = op;
  t.column = column;
  t.a = 1;
  t.b = 2;
  t.n = 16;
  return t;
}

int FieldIndex(const Layout& layout, const std::string& name) {
  for (size_t i = 0; i < layout.field_names.size(); ++i) {
    if (layout.field_names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(Layout, OutputsColumnsStacksAndTheirTypes) {
  OutputOptions options;
  options.all_columns = false;
  options.columns = {"id", "v", "seq"};
  options.stacks = {{"xy", {"x", "y"}}};
  options.with_sample_id = true;
  options.fill_null = 2.0;
  auto layout = MakeLayout(*TestSchema(), options).ValueOrDie();

  // Stack columns are decoded first, then the columns in the order asked.
  ASSERT_EQ(layout.field_names, (std::vector<std::string>{"x", "y", "id", "v", "seq"}));
  EXPECT_EQ(layout.fields, (std::vector<int>{1, 2, 0, 3, 4}));
  EXPECT_EQ(layout.field_dtypes,
            (std::vector<DType>{DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kFloat32,
                                DType::kInt32}));
  EXPECT_EQ(
      layout.field_shapes,
      (std::vector<ColumnShape>{ColumnShape::kScalar, ColumnShape::kScalar, ColumnShape::kScalar,
                                ColumnShape::kFixedList, ColumnShape::kList}));
  EXPECT_EQ(layout.field_used_alone, (std::vector<bool>{false, false, true, true, true}));
  ASSERT_EQ(layout.field_fill_null.size(), layout.fields.size());
  for (const auto& fill : layout.field_fill_null) {
    ASSERT_TRUE(fill.has_value());
    EXPECT_EQ(*fill, 2.0);
  }

  // Columns, then stacks, then the sample id.
  ASSERT_EQ(layout.outputs.size(), 5u);
  const auto& id = layout.outputs[0];
  EXPECT_EQ(id.name, "id");
  EXPECT_EQ(id.kind, OutputKind::kScalar);
  EXPECT_EQ(id.dtype, DType::kInt64);
  EXPECT_EQ(id.sources, std::vector<int>{2});
  const auto& v = layout.outputs[1];
  EXPECT_EQ(v.kind, OutputKind::kFixedList);
  EXPECT_EQ(v.width, 3);
  EXPECT_EQ(v.dtype, DType::kFloat32);
  const auto& seq = layout.outputs[2];
  EXPECT_EQ(seq.kind, OutputKind::kList);
  EXPECT_EQ(seq.dtype, DType::kInt32);
  const auto& xy = layout.outputs[3];
  EXPECT_EQ(xy.kind, OutputKind::kStack);
  EXPECT_EQ(xy.width, 2);
  EXPECT_EQ(xy.sources, (std::vector<int>{0, 1}));
  EXPECT_EQ(xy.dtype, DType::kFloat64);  // float32 with float64 widens
  EXPECT_EQ(layout.outputs[4].kind, OutputKind::kSampleId);
  EXPECT_EQ(layout.outputs[4].dtype, DType::kInt64);
}

TEST(Layout, AllColumnsLeavesStackedColumnsOutAndStackOfOneTypeKeepsIt) {
  auto schema = arrow::schema({arrow::field("a", arrow::int16()), arrow::field("b", arrow::int16()),
                               arrow::field("c", arrow::boolean())});
  OutputOptions options;
  options.stacks = {{"ab", {"a", "b"}}};
  auto layout = MakeLayout(*schema, options).ValueOrDie();
  ASSERT_EQ(layout.outputs.size(), 2u);
  EXPECT_EQ(layout.outputs[0].name, "c");
  EXPECT_EQ(layout.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(layout.outputs[1].name, "ab");
  EXPECT_EQ(layout.outputs[1].dtype, DType::kInt16);
}

TEST(Layout, TransformsDecideTheTypeAndTheDeterministicPrefix) {
  OutputOptions options;
  options.all_columns = false;
  options.columns = {"x", "name", "id"};
  options.transforms = {Spec(TransformOp::kStandardize, "id"),
                        Spec(TransformOp::kHashBucket, "name"),
                        Spec(TransformOp::kGaussianNoise, "id"), Spec(TransformOp::kClip, "id")};
  auto layout = MakeLayout(*TestSchema(), options).ValueOrDie();
  const int id = FieldIndex(layout, "id"), name = FieldIndex(layout, "name");
  const int x = FieldIndex(layout, "x");
  ASSERT_GE(id, 0);
  ASSERT_GE(name, 0);
  ASSERT_GE(x, 0);
  const auto i = static_cast<size_t>(id), n = static_cast<size_t>(name);
  EXPECT_EQ(layout.field_transforms[i], (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(layout.field_raw_dtypes[i], DType::kInt64);
  EXPECT_EQ(layout.field_dtypes[i], DType::kFloat32);  // Standardize -> float
  // Strings become 64-bit hashes before a HashBucket, then int64 buckets.
  EXPECT_TRUE(layout.field_from_strings[n]);
  EXPECT_EQ(layout.field_raw_dtypes[n], DType::kUInt64);
  EXPECT_EQ(layout.field_dtypes[n], DType::kInt64);
  // Only the transforms before the first random one may be stored decoded.
  EXPECT_EQ(DeterministicPrefix(layout, i), 1u);
  EXPECT_EQ(DeterministicPrefix(layout, n), 1u);
  EXPECT_EQ(DeterministicPrefix(layout, static_cast<size_t>(x)), 0u);
}

TEST(Layout, ErrorsNameTheColumn) {
  auto make = [](OutputOptions options) { return MakeLayout(*TestSchema(), options).status(); };
  OutputOptions missing;
  missing.all_columns = false;
  missing.columns = {"nope"};
  auto st = make(missing);
  EXPECT_EQ(KindOf(st), ErrorKind::kColumnNotFound);
  EXPECT_NE(st.message().find("'nope'"), std::string::npos) << st.ToString();

  OutputOptions strings;  // all columns, with a string column and no HashBucket
  st = make(strings);
  EXPECT_EQ(KindOf(st), ErrorKind::kUnsupportedType);
  EXPECT_NE(st.message().find("HashBucket(\"name\""), std::string::npos) << st.ToString();

  OutputOptions list_stack;
  list_stack.all_columns = false;
  list_stack.stacks = {{"s", {"x", "seq"}}};
  st = make(list_stack);
  EXPECT_EQ(KindOf(st), ErrorKind::kUnsupportedType);
  EXPECT_NE(st.message().find("'seq' is a list"), std::string::npos) << st.ToString();

  OutputOptions twice;
  twice.all_columns = false;
  twice.columns = {"x"};
  twice.stacks = {{"x", {"y"}}};
  st = make(twice);
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidArgument);
  EXPECT_NE(st.message().find("'x' is used twice"), std::string::npos) << st.ToString();

  OutputOptions orphan;
  orphan.all_columns = false;
  orphan.columns = {"x"};
  orphan.transforms = {Spec(TransformOp::kClip, "y")};
  st = make(orphan);
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidArgument);
  EXPECT_NE(st.message().find("not among the outputs"), std::string::npos) << st.ToString();
}

TEST(Layout, DescribeOutputsGivesListsALengthsOutput) {
  OutputOptions options;
  options.all_columns = false;
  options.columns = {"seq", "v"};
  auto infos = DescribeOutputs(*TestSchema(), options).ValueOrDie();
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].name, "seq");
  EXPECT_EQ(infos[0].inner_shape, std::vector<int64_t>{-1});
  EXPECT_EQ(infos[1].name, "seq_lengths");
  EXPECT_EQ(infos[1].dtype, DType::kInt64);
  EXPECT_TRUE(infos[1].inner_shape.empty());
  EXPECT_EQ(infos[2].name, "v");
  EXPECT_EQ(infos[2].inner_shape, std::vector<int64_t>{3});
}

}  // namespace
}  // namespace shardfeed
