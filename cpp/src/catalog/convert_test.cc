#include "catalog/convert.h"

#include <gtest/gtest.h>

#include <arrow/api.h>
#include <arrow/extension/fixed_shape_tensor.h>
#include <arrow/json/from_string.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/key_value_metadata.h>

namespace shardfeed {
namespace {

std::shared_ptr<arrow::Array> Json(const std::shared_ptr<arrow::DataType>& type,
                                   const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

// `array` collapsed, checked against `expected` (also as JSON) and validated in full.
void ExpectCollapsed(const std::shared_ptr<arrow::Array>& array,
                     const std::shared_ptr<arrow::DataType>& type, const std::string& expected) {
  auto collapsed = CollapseFixedLists(array).ValueOrDie();
  ASSERT_TRUE(collapsed->ValidateFull().ok()) << collapsed->ValidateFull().ToString();
  EXPECT_TRUE(collapsed->type()->Equals(*type)) << collapsed->type()->ToString();
  EXPECT_TRUE(collapsed->type()->Equals(*StorageType(array->type())))
      << StorageType(array->type())->ToString();
  auto want = Json(type, expected);
  EXPECT_TRUE(collapsed->Equals(*want)) << collapsed->ToString() << "\nwant\n" << want->ToString();
}

TEST(CollapseFixedLists, FixedSizeListsOfFixedSizeListsAreTheirValuesInOrder) {
  auto type = arrow::fixed_size_list(arrow::fixed_size_list(arrow::float32(), 3), 2);
  auto array = Json(type, "[[[1, 2, 3], [4, 5, 6]], null, [[7, null, 9], null]]");
  ExpectCollapsed(array, arrow::fixed_size_list(arrow::float32(), 6),
                  "[[1, 2, 3, 4, 5, 6], null, [7, null, 9, null, null, null]]");
  // A slice keeps its own rows: the offsets of both levels are honoured.
  ExpectCollapsed(array->Slice(1, 2), arrow::fixed_size_list(arrow::float32(), 6),
                  "[null, [7, null, 9, null, null, null]]");
  ExpectCollapsed(array->Slice(3, 0), arrow::fixed_size_list(arrow::float32(), 6), "[]");
}

TEST(CollapseFixedLists, ANullInnerListNullsItsValuesWhateverTheyHold) {
  // Parquet's reader leaves a null list's values null; an array made otherwise
  // may keep valid values under it.
  auto values = Json(arrow::int64(), "[1, 2, 3, 4, 5, 6, 7, 8]");
  auto inner_type = arrow::fixed_size_list(arrow::int64(), 2);
  auto validity = arrow::AllocateEmptyBitmap(4).ValueOrDie();
  for (int i : {0, 2, 3}) arrow::bit_util::SetBit(validity->mutable_data(), i);
  auto inner = arrow::ArrayData::Make(inner_type, 4, {validity, nullptr}, {values->data()}, 1);
  auto outer = arrow::MakeArray(
      arrow::ArrayData::Make(arrow::fixed_size_list(inner_type, 2), 2, {nullptr}, {inner}, 0));
  ExpectCollapsed(outer, arrow::fixed_size_list(arrow::int64(), 4),
                  "[[1, 2, null, null], [5, 6, 7, 8]]");
  ExpectCollapsed(outer->Slice(1, 1), arrow::fixed_size_list(arrow::int64(), 4), "[[5, 6, 7, 8]]");
}

TEST(CollapseFixedLists, ThreeLevelsAreOneList) {
  auto type = arrow::fixed_size_list(
      arrow::fixed_size_list(arrow::fixed_size_list(arrow::int64(), 2), 2), 2);
  auto array = Json(type, "[[[[1, 2], [3, 4]], [[5, 6], null]], [[[9, 10], [11, 12]], null]]");
  ExpectCollapsed(array->Slice(1, 1), arrow::fixed_size_list(arrow::int64(), 8),
                  "[[9, 10, 11, 12, null, null, null, null]]");
  ExpectCollapsed(array, arrow::fixed_size_list(arrow::int64(), 8),
                  "[[1, 2, 3, 4, 5, 6, null, null], [9, 10, 11, 12, null, null, null, null]]");
}

TEST(CollapseFixedLists, ListsOfFixedSizeListsCountValues) {
  for (const auto& outer : {arrow::list(arrow::fixed_size_list(arrow::float64(), 2)),
                            arrow::large_list(arrow::fixed_size_list(arrow::float64(), 2))}) {
    auto array = Json(outer, "[[[1, 2], [3, 4]], [], null, [null, [5, 6], [7, null]]]");
    auto want = outer->id() == arrow::Type::LIST ? arrow::list(arrow::float64())
                                                 : arrow::large_list(arrow::float64());
    ExpectCollapsed(array, want, "[[1, 2, 3, 4], [], null, [null, null, 5, 6, 7, null]]");
    ExpectCollapsed(array->Slice(2, 2), want, "[null, [null, null, 5, 6, 7, null]]");
    ExpectCollapsed(array->Slice(4, 0), want, "[]");
  }
}

TEST(CollapseFixedLists, OtherArraysAreUntouched) {
  for (const auto& type : {arrow::list(arrow::int32()), arrow::fixed_size_list(arrow::int32(), 2),
                           arrow::list(arrow::list(arrow::int32()))}) {
    auto array = Json(type, "[]");
    EXPECT_EQ(CollapseFixedLists(array).ValueOrDie(), array);
    EXPECT_EQ(StorageType(type), type);
  }
  // A fixed-size list inside a variable-length list inside a list stays nested
  // below the variable level, collapsed above nothing.
  auto nested = arrow::list(arrow::list(arrow::fixed_size_list(arrow::int32(), 2)));
  EXPECT_TRUE(StorageType(nested)->Equals(*arrow::list(arrow::list(arrow::int32()))));
  ExpectCollapsed(Json(nested, "[[[[1, 2]], []], null]"), arrow::list(arrow::list(arrow::int32())),
                  "[[[1, 2], []], null]");
}

TEST(CollapseFixedLists, ConformArrayCollapsesToTheReadType) {
  auto type = arrow::fixed_size_list(arrow::fixed_size_list(arrow::decimal128(5, 1), 2), 2);
  auto array = Json(type, R"([[["1.5", "2.5"], ["3.0", null]]])");
  auto read_type = ReadType(StorageType(type));
  EXPECT_TRUE(read_type->Equals(*arrow::fixed_size_list(arrow::float64(), 4)));
  auto conformed = ConformArray(array, read_type).ValueOrDie();
  EXPECT_TRUE(conformed->Equals(*Json(read_type, "[[1.5, 2.5, 3.0, null]]")))
      << conformed->ToString();
}

TEST(CollapsedShape, NamesTheLevelsOfWhatCollapses) {
  const auto f = arrow::float32();
  EXPECT_EQ(CollapsedShape(*arrow::fixed_size_list(arrow::fixed_size_list(f, 3), 2)), "[2, 3]");
  EXPECT_EQ(CollapsedShape(*arrow::large_list(arrow::fixed_size_list(f, 3))), "[*, 3]");
  EXPECT_EQ(CollapsedShape(*arrow::fixed_size_list(arrow::fixed_size_list(f, 3), 1)), "[1, 3]");
  // A variable-length level below the first stays nested: no shape.
  EXPECT_EQ(CollapsedShape(*arrow::list(arrow::list(arrow::fixed_size_list(f, 3)))), "");
  EXPECT_EQ(CollapsedShape(*arrow::fixed_size_list(f, 6)), "");
  EXPECT_EQ(CollapsedShape(*arrow::list(f)), "");
  EXPECT_EQ(CollapsedShape(*arrow::fixed_size_list(arrow::list(f), 2)), "");
  EXPECT_EQ(CollapsedShape(*f), "");
}

TEST(CollapsedShape, ATensorIsItsShapeInStorageOrder) {
  auto tensor = arrow::extension::fixed_shape_tensor(arrow::float32(), {2, 3, 4});
  EXPECT_EQ(CollapsedShape(*tensor), "[2, 3, 4]");
  EXPECT_EQ(CollapsedShape(*arrow::list(tensor)), "[*, 2, 3, 4]");
  auto permuted = arrow::extension::fixed_shape_tensor(arrow::float32(), {2, 3, 4}, {2, 0, 1});
  EXPECT_EQ(CollapsedShape(*permuted), "[2, 3, 4]");  // the physical shape, as stored
  auto flat = arrow::extension::fixed_shape_tensor(arrow::float32(), {6});
  EXPECT_EQ(CollapsedShape(*flat), "");
}

TEST(FixedShape, ReadsTheKeyWhenEveryLevelIsFixed) {
  auto with = [](const std::string& text) {
    return FixedShape(*arrow::field("a", arrow::float32())
                           ->WithMetadata(arrow::key_value_metadata({kShapeKey}, {text})));
  };
  EXPECT_EQ(with("[2, 3]"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(with("[4, 2, 3]"), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_TRUE(with("[*, 3]").empty());
  EXPECT_TRUE(with("[6]").empty());
  EXPECT_TRUE(with("garbage").empty());
  EXPECT_TRUE(with("[2, -3]").empty());
  EXPECT_TRUE(FixedShape(*arrow::field("a", arrow::float32())).empty());
}

}  // namespace
}  // namespace shardfeed
