#include "catalog/partition.h"

#include <arrow/scalar.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

TEST(Partition, ParsesKeyValueFoldersOnly) {
  auto pairs = ParseHivePath("date=2024-01-01/misc/hour=03/part-0.parquet");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].first, "date");
  EXPECT_EQ(*pairs[0].second, "2024-01-01");
  EXPECT_EQ(pairs[1].first, "hour");
  EXPECT_EQ(*pairs[1].second, "03");
  EXPECT_TRUE(ParseHivePath("a=1.parquet").empty());  // the file name is not a folder
  EXPECT_TRUE(ParseHivePath("=x/f").empty());         // no key
}

TEST(Partition, DecodesEscapesAndTheDefaultPartition) {
  EXPECT_EQ(UrlDecode("New%20York"), "New York");
  EXPECT_EQ(UrlDecode("a%2Fb%3d"), "a/b=");
  EXPECT_EQ(UrlDecode("100%"), "100%");  // malformed escapes stay
  EXPECT_EQ(UrlDecode("%zz%4"), "%zz%4");
  auto pairs = ParseHivePath("city=New%20York/k=__HIVE_DEFAULT_PARTITION__/f");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(*pairs[0].second, "New York");
  EXPECT_FALSE(pairs[1].second.has_value());
}

TEST(Partition, TypesKeysAcrossAllFiles) {
  auto table =
      InferPartitions({"d=2024-01-01/h=03/a", "d=2024-01-02/h=__HIVE_DEFAULT_PARTITION__/b",
                       "d=2024-01-02/h=-7/c"})
          .ValueOrDie();
  ASSERT_EQ(table.schema->num_fields(), 2);
  EXPECT_TRUE(table.schema->field(0)->type()->Equals(arrow::utf8()));
  EXPECT_TRUE(table.schema->field(1)->type()->Equals(arrow::int64()));
  ASSERT_EQ(table.values.size(), 3u);
  EXPECT_EQ(table.values[0][0]->ToString(), "2024-01-01");
  EXPECT_EQ(static_cast<const arrow::Int64Scalar&>(*table.values[0][1]).value, 3);
  EXPECT_FALSE(table.values[1][1]->is_valid);
  EXPECT_EQ(static_cast<const arrow::Int64Scalar&>(*table.values[2][1]).value, -7);
  // One value that is not an integer makes the key a string everywhere.
  auto mixed = InferPartitions({"k=1/a", "k=x/b"}).ValueOrDie();
  EXPECT_TRUE(mixed.schema->field(0)->type()->Equals(arrow::utf8()));
  EXPECT_EQ(mixed.values[0][0]->ToString(), "1");
  // No partition folders: no keys.
  EXPECT_EQ(InferPartitions({"a/b", "c"}).ValueOrDie().schema->num_fields(), 0);
  // An empty value is "" (as pyarrow reads it), or null in a Delta table's files.
  auto plain = InferPartitions({"k=/a", "k=4/b"}).ValueOrDie();
  EXPECT_TRUE(plain.schema->field(0)->type()->Equals(arrow::utf8()));
  EXPECT_TRUE(plain.values[0][0]->is_valid);
  auto delta = InferPartitions({"k=/a", "k=4/b"}, {true, true}).ValueOrDie();
  EXPECT_TRUE(delta.schema->field(0)->type()->Equals(arrow::int64()));
  EXPECT_FALSE(delta.values[0][0]->is_valid);
}

TEST(Partition, OnlyIntegersAreIntegersAndOnlyTextIsAString) {
  // "+-5" is no integer (from_chars took the '-' after the '+'); "+5" is 5, as Spark reads it.
  auto sign = InferPartitions({"k=+-5/a", "k=1/b"}).ValueOrDie();
  EXPECT_TRUE(sign.schema->field(0)->type()->Equals(arrow::utf8()));
  EXPECT_EQ(sign.values[0][0]->ToString(), "+-5");
  auto plus = InferPartitions({"k=+5/a"}).ValueOrDie();
  EXPECT_EQ(static_cast<const arrow::Int64Scalar&>(*plus.values[0][0]).value, 5);
  // A value that is not UTF-8 (a Latin-1 folder, "%FF") makes the key binary, its bytes kept.
  auto latin1 = InferPartitions({"k=caf\xe9/a", "k=ok/b", "k=%FF/c"}).ValueOrDie();
  EXPECT_TRUE(latin1.schema->field(0)->type()->Equals(arrow::binary()));
  EXPECT_EQ(static_cast<const arrow::BinaryScalar&>(*latin1.values[0][0]).view(), "caf\xe9");
  EXPECT_EQ(static_cast<const arrow::BinaryScalar&>(*latin1.values[2][0]).view(), "\xff");
}

TEST(Partition, FilesMustAgreeOnTheKeys) {
  auto st = InferPartitions({"a=1/b=2/f", "a=1/g"}).status();
  EXPECT_EQ(KindOf(st), ErrorKind::kSchemaMismatch);
  EXPECT_NE(st.message().find("'a=1/b=2/f'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'a=1/g'"), std::string::npos) << st.message();
  EXPECT_FALSE(InferPartitions({"a=1/b=2/f", "b=1/a=2/g"}).ok());  // order matters
  EXPECT_FALSE(InferPartitions({"a=1/a=2/f"}).ok());               // a key twice
}

}  // namespace
}  // namespace shardfeed
