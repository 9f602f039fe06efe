#include "catalog/unify.h"

#include <map>
#include <string>
#include <vector>

#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>

#include "catalog/convert.h"

namespace shardfeed {
namespace {

using arrow::DataType;
using TypePtr = std::shared_ptr<DataType>;

std::string Promote(const TypePtr& a, const TypePtr& b) {
  auto ab = PromoteTypes(a, b);
  auto ba = PromoteTypes(b, a);
  EXPECT_EQ(ab.ok(), ba.ok());
  if (!ab.ok()) return "error";
  EXPECT_TRUE((*ab)->Equals(**ba)) << (*ab)->ToString() << " vs " << (*ba)->ToString();
  return (*ab)->ToString();
}

TEST(Promote, Integers) {
  EXPECT_EQ(Promote(arrow::int32(), arrow::int64()), "int64");
  EXPECT_EQ(Promote(arrow::uint8(), arrow::uint32()), "uint32");
  EXPECT_EQ(Promote(arrow::int8(), arrow::uint8()), "int16");
  EXPECT_EQ(Promote(arrow::int64(), arrow::uint32()), "int64");
  EXPECT_EQ(Promote(arrow::int32(), arrow::uint32()), "int64");
  EXPECT_EQ(Promote(arrow::int64(), arrow::uint64()), "error");
  EXPECT_EQ(Promote(arrow::int8(), arrow::uint64()), "error");
}

TEST(Promote, FloatsAndDecimals) {
  EXPECT_EQ(Promote(arrow::float32(), arrow::float64()), "double");
  EXPECT_EQ(Promote(arrow::float16(), arrow::float32()), "float");
  EXPECT_EQ(Promote(arrow::int32(), arrow::float32()), "double");
  EXPECT_EQ(Promote(arrow::uint64(), arrow::float64()), "double");
  EXPECT_EQ(Promote(arrow::decimal128(10, 2), arrow::decimal128(12, 3)), "double");
  EXPECT_EQ(Promote(arrow::decimal128(10, 2), arrow::int64()), "double");
  EXPECT_EQ(Promote(arrow::boolean(), arrow::int8()), "error");
}

TEST(Promote, StringsBinariesAndLists) {
  EXPECT_EQ(Promote(arrow::utf8(), arrow::large_utf8()), "large_string");
  EXPECT_EQ(Promote(arrow::binary(), arrow::large_binary()), "large_binary");
  // Text without the UTF8 annotation (old Hive, Impala) with annotated text: bytes.
  EXPECT_EQ(Promote(arrow::utf8(), arrow::binary()), "large_binary");
  EXPECT_EQ(Promote(arrow::large_binary(), arrow::large_utf8()), "large_binary");
  EXPECT_EQ(Promote(arrow::utf8(), arrow::int64()), "error");
  EXPECT_EQ(Promote(arrow::list(arrow::int32()), arrow::large_list(arrow::int64())),
            "large_list<item: int64>");
  EXPECT_EQ(Promote(arrow::fixed_size_list(arrow::float32(), 3),
                    arrow::fixed_size_list(arrow::float64(), 3)),
            "fixed_size_list<item: double>[3]");
  EXPECT_EQ(Promote(arrow::fixed_size_list(arrow::float32(), 3),
                    arrow::fixed_size_list(arrow::float32(), 4)),
            "error");
  EXPECT_EQ(Promote(arrow::list(arrow::utf8()), arrow::list(arrow::int8())), "error");
  // Element names differ between writers ("item", "element"): the same type.
  auto item = arrow::list(arrow::field("item", arrow::int64()));
  auto element = arrow::list(arrow::field("element", arrow::int64()));
  EXPECT_TRUE(PromoteTypes(item, element).ok());
}

TEST(Promote, TimesAndNulls) {
  EXPECT_EQ(
      Promote(arrow::timestamp(arrow::TimeUnit::MILLI), arrow::timestamp(arrow::TimeUnit::MICRO)),
      "timestamp[us]");
  EXPECT_EQ(Promote(arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"),
                    arrow::timestamp(arrow::TimeUnit::MILLI)),
            "error");
  // Two zones: the same instants, in UTC.
  EXPECT_EQ(Promote(arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"),
                    arrow::timestamp(arrow::TimeUnit::MICRO, "America/New_York")),
            "timestamp[us, tz=UTC]");
  EXPECT_EQ(Promote(arrow::timestamp(arrow::TimeUnit::SECOND, "+01:00"),
                    arrow::timestamp(arrow::TimeUnit::SECOND, "Asia/Tokyo")),
            "timestamp[s, tz=UTC]");
  EXPECT_EQ(Promote(arrow::date32(), arrow::date64()), "date32[day]");
  EXPECT_EQ(
      Promote(arrow::duration(arrow::TimeUnit::SECOND), arrow::duration(arrow::TimeUnit::NANO)),
      "duration[ns]");
  EXPECT_EQ(Promote(arrow::null(), arrow::utf8()), "string");
  EXPECT_EQ(Promote(arrow::date32(), arrow::int32()), "error");
}

TEST(Promote, DictionariesCountAsTheirValues) {
  auto dict = arrow::dictionary(arrow::int8(), arrow::utf8());
  EXPECT_EQ(StripDictionary(dict)->ToString(), "string");
  EXPECT_EQ(StripDictionary(arrow::list(dict))->ToString(), "list<item: string>");
}

TEST(Unify, MatchesColumnsByNameAndRecordsConflicts) {
  SchemaUnifier unifier;
  unifier.Add("a", *arrow::schema({arrow::field("x", arrow::int32(), false),
                                   arrow::field("s", arrow::utf8())}));
  unifier.Add("b", *arrow::schema({arrow::field("s", arrow::int64()),
                                   arrow::field("x", arrow::int64(), false),
                                   arrow::field("new", arrow::float32(), false)}));
  EXPECT_FALSE(unifier.uniform());
  auto columns = unifier.Columns();
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(columns[0].field->ToString(), "x: int64 not null");
  EXPECT_EQ(columns[0].file_types, (std::vector<std::string>{"int32", "int64"}));
  EXPECT_EQ(columns[1].field->name(), "s");
  EXPECT_NE(columns[1].conflict.find("file 'b'"), std::string::npos) << columns[1].conflict;
  EXPECT_NE(columns[1].conflict.find("file 'a'"), std::string::npos) << columns[1].conflict;
  ASSERT_TRUE(columns[1].field->metadata());
  EXPECT_TRUE(columns[1].field->metadata()->Contains(kConflictKey));
  EXPECT_EQ(columns[2].field->ToString(), "new: float");  // missing in 'a': nullable
  EXPECT_EQ(columns[2].missing_files, 1);
  auto maps = unifier.FieldMaps();
  EXPECT_EQ(maps[0], (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(maps[1], (std::vector<int>{1, 0, 2}));
}

TEST(Unify, TwoColumnsOfOneNameInAFileAreAConflict) {
  SchemaUnifier unifier;
  unifier.Add("a",
              *arrow::schema({arrow::field("y", arrow::int64()), arrow::field("y", arrow::int64()),
                              arrow::field("z", arrow::int64())}));
  unifier.Add(
      "b", *arrow::schema({arrow::field("y", arrow::int64()), arrow::field("z", arrow::int64())}));
  auto columns = unifier.Columns();
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_NE(columns[0].conflict.find("file 'a' has more than one column named 'y'"),
            std::string::npos)
      << columns[0].conflict;
  EXPECT_TRUE(columns[1].conflict.empty()) << columns[1].conflict;
  EXPECT_EQ(unifier.FieldMaps()[0], (std::vector<int>{0, 2}));
}

TEST(Unify, CollapsedArraysOfOtherShapesAreAConflict) {
  // Files whose fixed-size lists collapsed (convert.h): six values as [2, 3]
  // in one, [3, 2] in another, and a plain list of six (no shape) in a third.
  const auto six = arrow::fixed_size_list(arrow::float32(), 6);
  auto shaped = [&](const std::string& name, const std::string& shape) {
    return arrow::field(name, six)->WithMetadata(arrow::key_value_metadata({kShapeKey}, {shape}));
  };
  SchemaUnifier unifier;
  unifier.Add("a", *arrow::schema({shaped("g", "[2, 3]"), shaped("h", "[2, 3]")}));
  unifier.Add("b", *arrow::schema({arrow::field("g", six), shaped("h", "[3, 2]")}));
  unifier.Add("c", *arrow::schema({shaped("g", "[2, 3]"), shaped("h", "[2, 3]")}));
  auto columns = unifier.Columns();
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_TRUE(columns[0].conflict.empty()) << columns[0].conflict;
  EXPECT_EQ(columns[1].conflict,
            "column 'h' holds arrays of shape [2, 3] in file 'a' and [3, 2] in file 'b' (leave "
            "the column out with columns=[...] or rewrite one of the files)");
  ASSERT_NE(columns[1].field->metadata(), nullptr);
  EXPECT_TRUE(columns[1].field->metadata()->Contains(kConflictKey));
}

TEST(Unify, NamesDifferingOnlyInCaseInDisjointFilesAreAConflict) {
  auto i64 = arrow::int64();
  SchemaUnifier unifier;
  unifier.Add("a", *arrow::schema({arrow::field("UserId", i64), arrow::field("x", i64)}));
  unifier.Add("b", *arrow::schema({arrow::field("userid", i64), arrow::field("x", i64)}));
  unifier.Add("c", *arrow::schema({arrow::field("userid", i64)}));
  auto columns = unifier.Columns();
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_NE(columns[0].conflict.find("'UserId' is in 1 file(s) (such as 'a') and 'userid' in 2"),
            std::string::npos)
      << columns[0].conflict;
  EXPECT_NE(columns[2].conflict.find("'userid' is in 2 file(s) (such as 'b') and 'UserId' in 1"),
            std::string::npos)
      << columns[2].conflict;
  EXPECT_NE(columns[0].field->metadata(), nullptr);
  // x is missing from file c, but no other column is spelled like it.
  EXPECT_TRUE(columns[1].conflict.empty()) << columns[1].conflict;

  // Two columns of one file that differ in case are two columns.
  SchemaUnifier both;
  both.Add("a", *arrow::schema({arrow::field("A", i64), arrow::field("a", i64)}));
  both.Add("b", *arrow::schema({arrow::field("a", i64)}));
  for (const auto& c : both.Columns()) EXPECT_TRUE(c.conflict.empty()) << c.conflict;
}

TEST(Unify, AStructAndAColumnOfOneNameAreAConflict) {
  const auto s = arrow::struct_({arrow::field("a", arrow::int64())});
  const arrow::Schema struct_top({arrow::field("s", s), arrow::field("x", arrow::int32())});
  const arrow::Schema struct_flat(
      {arrow::field("s.a", arrow::int64()), arrow::field("x", arrow::int32())});
  // 's' a struct in one file, an int64 in another; the struct's field 's.a'
  // and a column named 's.a'; an all-null 's' clashes with nothing.
  const arrow::Schema scalar(
      {arrow::field("s", arrow::int64()), arrow::field("x", arrow::int32())});
  const arrow::Schema dotted({arrow::field("s.a", arrow::int64())});
  const arrow::Schema null_s({arrow::field("s", arrow::null())});
  const auto conflicts = [&](const std::vector<const arrow::Schema*>& tops) {
    SchemaUnifier unifier;
    for (const auto* top : tops) {
      const auto& flat = top == &struct_top ? struct_flat : *top;
      unifier.Add(top == &struct_top ? "struct" : "other", flat, nullptr, top);
    }
    std::map<std::string, std::string> out;
    for (const auto& c : unifier.Columns()) out[c.field->name()] = c.conflict;
    return out;
  };
  auto got = conflicts({&struct_top, &scalar});
  EXPECT_NE(got["s"].find("'s' is a struct in file 'struct'"), std::string::npos) << got["s"];
  EXPECT_EQ(got["s.a"], got["s"]);
  EXPECT_EQ(got["x"], "");
  got = conflicts({&struct_top, &dotted});
  EXPECT_NE(got["s.a"].find("is the field 'a' of the struct 's' in file 'struct' and a column of "
                            "its own in file 'other'"),
            std::string::npos)
      << got["s.a"];
  got = conflicts({&dotted, &struct_top});
  EXPECT_NE(got["s.a"].find("is a column of its own in file 'other' and the field 'a'"),
            std::string::npos)
      << got["s.a"];
  got = conflicts({&struct_top, &null_s, &struct_top});
  EXPECT_EQ(got["s.a"], "");
  EXPECT_EQ(got["s"], "");
}

TEST(Unify, NamesOfAStructAndItsFieldsAreKnown) {
  // What a partition key of such a name is refused by (catalog.cc SetSchema).
  const auto s = arrow::struct_({arrow::field("a", arrow::int64())});
  const arrow::Schema top({arrow::field("s", s), arrow::field("x", arrow::int32())});
  const arrow::Schema flat(
      {arrow::field("s.a", arrow::int64()), arrow::field("x", arrow::int32())});
  SchemaUnifier unifier;
  unifier.Add("f.parquet", flat, nullptr, &top);
  EXPECT_EQ(unifier.StructNamed("s"), "a struct in file 'f.parquet'");
  EXPECT_EQ(unifier.StructNamed("s.a"), "the field 'a' of the struct 's' in file 'f.parquet'");
  EXPECT_EQ(unifier.StructNamed("x"), "");
  EXPECT_EQ(unifier.StructNamed("k"), "");
}

TEST(Unify, UniformFilesKeepTheirSchema) {
  SchemaUnifier unifier;
  auto schema = arrow::schema({arrow::field("x", arrow::int32(), false)});
  unifier.Add("a", *schema);
  unifier.Add("b", *schema);
  EXPECT_TRUE(unifier.uniform());
  EXPECT_EQ(unifier.Columns()[0].field->ToString(), "x: int32 not null");
}

TEST(SchemaUnifier, Int96TimestampsAreInstantsBesideZonedOnes) {
  const auto naive = arrow::schema({arrow::field("t", arrow::timestamp(arrow::TimeUnit::MICRO))});
  const auto zoned =
      arrow::schema({arrow::field("t", arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"))});
  const std::vector<bool> int96 = {true}, plain = {false};
  // INT96 first or second, beside a zoned file: one column of UTC instants.
  for (const bool int96_first : {true, false}) {
    SchemaUnifier unifier;
    if (int96_first) unifier.Add("a", *naive, nullptr, nullptr, nullptr, &int96);
    unifier.Add("b", *zoned);
    if (!int96_first) unifier.Add("c", *naive, nullptr, nullptr, nullptr, &int96);
    ASSERT_TRUE(unifier.Columns()[0].conflict.empty()) << unifier.Columns()[0].conflict;
    EXPECT_EQ(unifier.Columns()[0].field->type()->ToString(), "timestamp[us, tz=UTC]");
  }
  // A naive column that is not INT96 has no common type with a zoned one, INT96 files or not.
  SchemaUnifier mixed;
  mixed.Add("a", *naive, nullptr, nullptr, nullptr, &int96);
  mixed.Add("b", *naive, nullptr, nullptr, nullptr, &plain);
  EXPECT_EQ(mixed.Columns()[0].field->type()->ToString(), "timestamp[us]");
  mixed.Add("c", *zoned);
  EXPECT_FALSE(mixed.Columns()[0].conflict.empty());
}

TEST(ColumnsBeyond, AddedAndWidenedColumnsOnly) {
  SchemaUnifier unifier;
  unifier.Add(
      "a.parquet",
      *arrow::schema({arrow::field("i", arrow::int32()), arrow::field("u", arrow::uint8()),
                      arrow::field("f", arrow::float32()), arrow::field("d", arrow::date32()),
                      arrow::field("t", arrow::timestamp(arrow::TimeUnit::NANO)),
                      arrow::field("l", arrow::int64()), arrow::field("ID", arrow::int64())}));
  const arrow::FieldVector declared = {
      arrow::field("i", arrow::int64()),  // widened
      arrow::field("u", arrow::int64()),  // unsigned in the file: left to it
      arrow::field("f", arrow::float64()),
      arrow::field("d", arrow::timestamp(arrow::TimeUnit::MICRO)),
      arrow::field("t", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),  // not a widening
      arrow::field("l", arrow::int32()),                                   // narrower: the file's
      arrow::field("id", arrow::int64()),  // the file's "ID": held, no case twin made
      arrow::field("new", arrow::utf8(), /*nullable=*/false)};
  const auto names = [](const arrow::FieldVector& fields) {
    std::vector<std::string> out;
    for (const auto& field : fields) out.push_back(field->ToString());
    return out;
  };
  auto columns = unifier.Columns();
  const auto beyond = ColumnsBeyond(columns, declared, /*widen=*/true);
  EXPECT_EQ(names(beyond),
            (std::vector<std::string>{"i: int64", "f: double", "d: timestamp[us]", "new: string"}));
  EXPECT_EQ(names(ColumnsBeyond(columns, declared, /*widen=*/false)),
            (std::vector<std::string>{"new: string"}));
  ASSERT_TRUE(ApplyColumnsBeyond(beyond, 3, &columns));
  ASSERT_EQ(columns.size(), 8u);
  EXPECT_EQ(columns[0].field->ToString(), "i: int64");
  EXPECT_EQ(columns[0].missing_files, 0);
  EXPECT_EQ(columns[7].field->ToString(), "new: string");  // last, nullable
  EXPECT_EQ(columns[7].missing_files, 3);
  EXPECT_FALSE(ApplyColumnsBeyond({}, 3, &columns));
}

TEST(ColumnsBeyond, DecimalsWidenOnlyToOnesThatHoldEveryValue) {
  SchemaUnifier unifier;
  unifier.Add(
      "a.parquet",
      *arrow::schema(
          {arrow::field("i8", arrow::int8()), arrow::field("i64", arrow::int64()),
           arrow::field("i64b", arrow::int64()), arrow::field("d", arrow::decimal128(5, 2)),
           arrow::field("e", arrow::decimal128(5, 2)), arrow::field("u", arrow::uint32())}));
  const arrow::FieldVector declared = {
      arrow::field("i8", arrow::decimal128(3, 0)),     // 3 digits hold -128..127
      arrow::field("i64", arrow::decimal128(22, 2)),   // 20 before the point
      arrow::field("i64b", arrow::decimal128(18, 0)),  // too few for an int64
      arrow::field("d", arrow::decimal128(7, 3)),      // 4 before, 3 after: both more
      arrow::field("e", arrow::decimal128(6, 4)),      // 2 before the point: fewer
      arrow::field("u", arrow::decimal128(30, 0))};    // unsigned: left to the file
  std::vector<std::string> got;
  for (const auto& field : ColumnsBeyond(unifier.Columns(), declared, /*widen=*/true)) {
    got.push_back(field->ToString());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"i8: decimal128(3, 0)", "i64: decimal128(22, 2)",
                                           "d: decimal128(7, 3)"}));
}

}  // namespace
}  // namespace shardfeed
