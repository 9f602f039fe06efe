#include "transform/vocabulary.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "shardfeed/vocabulary.h"
#include "transform/transform.h"
#include "util/hash.h"

namespace shardfeed {
namespace {

std::shared_ptr<const VocabularyTable> Table(std::vector<std::string> values) {
  return VocabularyTable::Make(std::move(values)).ValueOrDie();
}

// A string column as Flatten leaves it: hashes as values, the strings in `array`.
DecodedColumn StringColumn(const std::shared_ptr<arrow::Array>& array,
                           const std::vector<uint64_t>& hashes) {
  DecodedColumn c;
  c.dtype = DType::kUInt64;
  c.from_strings = true;
  c.count = array->length();
  c.owned = arrow::AllocateBuffer(static_cast<int64_t>(hashes.size() * 8) + 8).ValueOrDie();
  std::memcpy(c.owned->mutable_data(), hashes.data(), hashes.size() * 8);
  c.values = c.owned->data();
  c.array = array;
  if (array->null_count() > 0) c.nulls.assign(static_cast<size_t>(array->length()), 0);
  for (int64_t i = 0; i < array->length(); ++i) {
    if (array->IsNull(i)) c.nulls[static_cast<size_t>(i)] = 1;
  }
  return c;
}

std::vector<int64_t> Ids(const DecodedColumn& c) {
  const auto* v = reinterpret_cast<const int64_t*>(c.values);
  return std::vector<int64_t>(v, v + c.count);
}

TEST(VocabularyTable, FindsEveryValueAndNothingElse) {
  std::vector<std::string> values;
  for (int i = 0; i < 1000; ++i) values.push_back("v" + std::to_string(i));
  values.push_back("");  // the empty string is a value like any other
  auto table = Table(values);
  ASSERT_EQ(table->size(), 1001);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(table->Find(values[i]), static_cast<int64_t>(i) + 1);
  }
  EXPECT_EQ(table->Find("v1000"), 0);
  EXPECT_EQ(table->Find("v"), 0);
  // A probe with another string's hash still compares the bytes.
  EXPECT_EQ(table->Find("nope", StringHash64("v7")), 0);
}

TEST(VocabularyTable, EmptyAndDuplicates) {
  auto empty = Table({});
  EXPECT_EQ(empty->Find("a"), 0);
  auto dup = VocabularyTable::Make({"a", "b", "a"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("listed twice"), std::string::npos);
}

TEST(VocabularyTable, DigestDependsOnValuesAndOrder) {
  EXPECT_EQ(Table({"a", "b"})->digest(), Table({"a", "b"})->digest());
  EXPECT_NE(Table({"a", "b"})->digest(), Table({"b", "a"})->digest());
  EXPECT_NE(Table({"ab", "c"})->digest(), Table({"a", "bc"})->digest());
}

TEST(Vocabulary, StringsAndNullsToIndices) {
  arrow::StringBuilder builder;
  ASSERT_TRUE(builder.AppendValues({"b", "zz", "a"}).ok());
  ASSERT_TRUE(builder.AppendNull().ok());
  auto array = builder.Finish().ValueOrDie();
  std::vector<uint64_t> hashes = {StringHash64("b"), StringHash64("zz"), StringHash64("a"), 0};
  auto c = StringColumn(array, hashes);
  TransformSpec t;
  t.op = TransformOp::kVocabulary;
  t.vocabulary = Table({"a", "b"});
  t.n = -1;  // oov
  ASSERT_TRUE(ApplyTransform(t, 0, {}, 0, 4, &c).ok());
  EXPECT_EQ(c.dtype, DType::kInt64);
  EXPECT_FALSE(c.has_nulls());
  EXPECT_EQ(Ids(c), (std::vector<int64_t>{2, -1, 1, -1}));
}

TEST(Vocabulary, ElementsMarkedNullAreOovThoughTheirStringsAreSet) {
  // The elements of a null fixed-size list: strings under the null parent,
  // marked in nulls by the decode.
  arrow::StringBuilder builder;
  ASSERT_TRUE(builder.AppendValues({"a", "b", "b", "a"}).ok());
  auto array = builder.Finish().ValueOrDie();
  std::vector<uint64_t> hashes;
  for (const char* s : {"a", "b", "b", "a"}) hashes.push_back(StringHash64(s));
  auto c = StringColumn(array, hashes);
  c.list_size = 2;
  c.nulls = {0, 0, 1, 1};  // row 1 is a null list
  TransformSpec t;
  t.op = TransformOp::kVocabulary;
  t.vocabulary = Table({"a", "b"});
  t.n = -3;
  ASSERT_TRUE(ApplyTransform(t, 0, {}, 0, 2, &c).ok());
  EXPECT_FALSE(c.has_nulls());
  EXPECT_EQ(Ids(c), (std::vector<int64_t>{1, 2, -3, -3}));
  // Strings that do not match the values' count are bad data, not a read past them.
  auto short_column = StringColumn(array, hashes);
  short_column.count = 5;
  auto st = ApplyTransform(t, 0, {}, 0, 5, &short_column);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("4 strings for 5 values"), std::string::npos);
}

TEST(Vocabulary, DictionaryLooksUpEachValueOnce) {
  arrow::StringBuilder dict_builder;
  ASSERT_TRUE(dict_builder.AppendValues({"x", "y", "q"}).ok());
  auto dict = dict_builder.Finish().ValueOrDie();
  arrow::Int8Builder index_builder;
  ASSERT_TRUE(index_builder.AppendValues({2, 0, 1, 0}).ok());
  ASSERT_TRUE(index_builder.AppendNull().ok());
  auto indices = index_builder.Finish().ValueOrDie();
  auto array = arrow::DictionaryArray::FromArrays(arrow::dictionary(arrow::int8(), arrow::utf8()),
                                                  indices, dict)
                   .ValueOrDie();
  auto c = StringColumn(array, std::vector<uint64_t>(5, 0));
  TransformSpec t;
  t.op = TransformOp::kVocabulary;
  t.vocabulary = Table({"y", "x"});
  ASSERT_TRUE(ApplyTransform(t, 0, {}, 0, 5, &c).ok());
  EXPECT_EQ(Ids(c), (std::vector<int64_t>{0, 2, 1, 2, 0}));
}

TEST(Vocabulary, TypeRules) {
  TransformSpec t;
  t.op = TransformOp::kVocabulary;
  t.column = "c";
  t.vocabulary = Table({"a"});
  EXPECT_EQ(TransformedType(t, DType::kUInt64, ColumnShape::kScalar, true).ValueOrDie(),
            DType::kInt64);
  auto numeric = TransformedType(t, DType::kInt32, ColumnShape::kScalar, false);
  ASSERT_FALSE(numeric.ok());
  EXPECT_NE(numeric.status().message().find("needs a string column"), std::string::npos);
  t.vocabulary.reset();
  EXPECT_FALSE(TransformedType(t, DType::kUInt64, ColumnShape::kScalar, true).ok());
}

TEST(FillValue, ExactnessPerType) {
  EXPECT_TRUE(CheckFillValue(255, DType::kUInt8, "x").ok());
  EXPECT_FALSE(CheckFillValue(-1, DType::kUInt8, "x").ok());
  EXPECT_FALSE(CheckFillValue(256, DType::kUInt8, "x").ok());
  EXPECT_FALSE(CheckFillValue(2.5, DType::kInt32, "x").ok());
  EXPECT_FALSE(CheckFillValue(300, DType::kInt8, "x").ok());
  EXPECT_TRUE(CheckFillValue(-128, DType::kInt8, "x").ok());
  EXPECT_FALSE(CheckFillValue(2, DType::kBool, "x").ok());
  EXPECT_TRUE(CheckFillValue(1, DType::kBool, "x").ok());
  EXPECT_TRUE(CheckFillValue(2.5, DType::kFloat32, "x").ok());
  EXPECT_FALSE(CheckFillValue(1e39, DType::kFloat32, "x").ok());
  EXPECT_TRUE(CheckFillValue(std::nan(""), DType::kFloat64, "x").ok());
  EXPECT_FALSE(CheckFillValue(std::nan(""), DType::kInt64, "x").ok());
  EXPECT_TRUE(CheckFillValue(-9223372036854775808.0, DType::kInt64, "x").ok());
  EXPECT_FALSE(CheckFillValue(9223372036854775808.0, DType::kInt64, "x").ok());
  EXPECT_TRUE(CheckFillValue(18446744073709549568.0, DType::kUInt64, "x").ok());
  EXPECT_FALSE(CheckFillValue(18446744073709551616.0, DType::kUInt64, "x").ok());
  auto st = CheckFillValue(-1, DType::kUInt8, "fill_null for column 'u'");
  EXPECT_NE(st.message().find("fill_null for column 'u'"), std::string::npos);
  EXPECT_NE(st.message().find("uint8"), std::string::npos);
}

}  // namespace
}  // namespace shardfeed
