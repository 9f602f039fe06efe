#include "catalog/column_mapping.h"

#include <string>
#include <vector>

#include <arrow/type.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

// A schema as Spark writes one: a renamed column ("score", physical col-2), a
// struct whose fields are mapped too, an array of structs, a map.
const char kSchema[] =
    R"({"type":"struct","fields":[)"
    R"({"name":"id","type":"long","nullable":true,"metadata":)"
    R"({"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}},)"
    R"({"name":"score","type":"double","nullable":true,"metadata":)"
    R"({"delta.columnMapping.physicalName":"col-2"}},)"
    R"({"name":"user","type":{"type":"struct","fields":[)"
    R"({"name":"age","type":"integer","nullable":true,"metadata":)"
    R"({"delta.columnMapping.physicalName":"col-4"}}]},"nullable":true,"metadata":)"
    R"({"delta.columnMapping.physicalName":"col-3"}},)"
    R"({"name":"items","type":{"type":"array","elementType":{"type":"struct","fields":[)"
    R"({"name":"price","type":"float","nullable":true,"metadata":)"
    R"({"delta.columnMapping.physicalName":"col-6"}}]},"containsNull":true},)"
    R"("nullable":true,"metadata":{"delta.columnMapping.physicalName":"col-5"}},)"
    R"({"name":"caf\u00e9 \"x\"","type":{"type":"map","keyType":"string","valueType":"long",)"
    R"("valueContainsNull":true},"nullable":true,"metadata":)"
    R"({"delta.columnMapping.physicalName":"col-7"}}]})";

TEST(ColumnMapping, MapsEveryFieldAndLeavesOutDroppedColumns) {
  const auto mapping = ParseColumnMapping(kSchema);
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_EQ(mapping->top_level,
            (std::set<std::string>{"col-1", "col-2", "col-3", "col-5", "col-7"}));
  EXPECT_EQ(DisplayName(*mapping, "col-2"), "score");
  EXPECT_EQ(DisplayName(*mapping, "col-3.col-4"), "user.age");
  EXPECT_EQ(DisplayName(*mapping, "col-5.col-6"), "items.price");
  EXPECT_EQ(DisplayName(*mapping, "col-7.key"), "caf\xc3\xa9 \"x\".key");
  EXPECT_EQ(DisplayName(*mapping, "col-9"), std::nullopt);  // dropped from the table
  EXPECT_EQ(DisplayName(*mapping, "col-4"), std::nullopt);  // a struct field, not a column
}

TEST(ColumnMapping, NamesAreMappedByTheirPathNotAlone) {
  // A table upgraded to the mapping keeps its names as physical ones: the
  // column "id" (renamed user_id) and the struct field s.id share "id", and
  // the struct field a.x was renamed y while b.x kept its name.
  const auto mapping = ParseColumnMapping(
      R"({"type":"struct","fields":[)"
      R"({"name":"user_id","type":"long","metadata":{"delta.columnMapping.physicalName":"id"}},)"
      R"({"name":"s","type":{"type":"struct","fields":[)"
      R"({"name":"id","type":"long","metadata":{"delta.columnMapping.physicalName":"id"}}]},)"
      R"("metadata":{"delta.columnMapping.physicalName":"s"}},)"
      R"({"name":"a","type":{"type":"struct","fields":[)"
      R"({"name":"y","type":"long","metadata":{"delta.columnMapping.physicalName":"x"}}]},)"
      R"("metadata":{"delta.columnMapping.physicalName":"a"}},)"
      R"({"name":"b","type":{"type":"struct","fields":[)"
      R"({"name":"x","type":"long","metadata":{"delta.columnMapping.physicalName":"x"}}]},)"
      R"("metadata":{"delta.columnMapping.physicalName":"b"}}]})");
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_EQ(DisplayName(*mapping, "id"), "user_id");
  EXPECT_EQ(DisplayName(*mapping, "s.id"), "s.id");
  EXPECT_EQ(DisplayName(*mapping, "a.x"), "a.y");
  EXPECT_EQ(DisplayName(*mapping, "b.x"), "b.x");
  EXPECT_EQ(DisplayName(*mapping, "x"), std::nullopt);  // a struct field, not a column
}

TEST(ColumnMapping, AMapsKeyAndValueAreStepsOfThePath) {
  // A map of structs whose key and value structs share physical names (an
  // upgraded table's old names), one renamed in each; and a value struct
  // whose fields are physically named "key" and "value".
  const auto mapping = ParseColumnMapping(
      R"({"type":"struct","fields":[)"
      R"({"name":"m","type":{"type":"map",)"
      R"("keyType":{"type":"struct","fields":[)"
      R"({"name":"kid","type":"long","metadata":{"delta.columnMapping.physicalName":"id"}}]},)"
      R"("valueType":{"type":"struct","fields":[)"
      R"({"name":"vid","type":"long","metadata":{"delta.columnMapping.physicalName":"id"}},)"
      R"({"name":"k2","type":"long","metadata":{"delta.columnMapping.physicalName":"key"}},)"
      R"({"name":"amount","type":"long","metadata":{"delta.columnMapping.physicalName":"value"}}]}},)"
      R"("metadata":{"delta.columnMapping.physicalName":"m"}}]})");
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_EQ(DisplayName(*mapping, "m.key.id"), "m.key.kid");
  EXPECT_EQ(DisplayName(*mapping, "m.value.id"), "m.value.vid");
  EXPECT_EQ(DisplayName(*mapping, "m.value.key"), "m.value.k2");
  EXPECT_EQ(DisplayName(*mapping, "m.value.value"), "m.value.amount");
}

TEST(ColumnMapping, DamagedSchemasAreInvalidData) {
  for (
      const std::string& bad : std::vector<std::string>{
          "",
          "{",
          "[1,2]",
          "{\"type\":\"struct\"}",
          "{\"type\":\"struct\",\"fields\":[]}",
          R"({"type":"struct","fields":[{"name":"a","type":"long","metadata":{}}]})",
          R"({"type":"struct","fields":[{"name":"a","metadata":{"delta.columnMapping.physicalName":"p"}},)"
          R"({"name":"b","metadata":{"delta.columnMapping.physicalName":"p"}}]})",
          R"({"type":"struct","fields":[{"name":"a\ud800","metadata":{}}]})",
          R"({"type":"struct","fields":[]} x)",
          std::string(100000, '['),
      }) {
    const auto mapping = ParseColumnMapping(bad);
    ASSERT_FALSE(mapping.ok()) << bad.substr(0, 80);
    EXPECT_EQ(KindOf(mapping.status()), ErrorKind::kInvalidData) << mapping.status().ToString();
  }
}

TEST(PrimitiveColumns, TheTablesPrimitiveColumnsByTheirNames) {
  // kSchema's id and score; its struct, array and map columns are left out.
  auto columns = PrimitiveColumns(kSchema, {});
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  ASSERT_EQ(columns->size(), 2u);
  EXPECT_EQ((*columns)[0]->ToString(), "id: int64");
  EXPECT_EQ((*columns)[1]->ToString(), "score: double");
  const char kTypes[] =
      R"j({"type":"struct","fields":[)j"
      R"j({"name":"b","type":"boolean","nullable":false,"metadata":{}},)j"
      R"j({"name":"i8","type":"byte"},{"name":"i16","type":"short"},)j"
      R"j({"name":"i32","type":"integer"},{"name":"f","type":"float"},)j"
      R"j({"name":"s","type":"string"},{"name":"bin","type":"binary"},)j"
      R"j({"name":"day","type":"date"},{"name":"t","type":"timestamp"},)j"
      R"j({"name":"ntz","type":"timestamp_ntz"},{"name":"dec","type":"decimal(10, 2)"},)j"
      R"j({"name":"bad","type":"decimal(2,5)"},{"name":"v","type":"variant"},)j"
      R"j({"name":"part","type":"string"}]})j";
  columns = PrimitiveColumns(kTypes, {"part"});
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  std::vector<std::string> got;
  for (const auto& field : *columns) got.push_back(field->ToString());
  EXPECT_EQ(got, (std::vector<std::string>{"b: bool", "i8: int8", "i16: int16", "i32: int32",
                                           "f: float", "s: string", "bin: binary",
                                           "day: date32[day]", "t: timestamp[us, tz=UTC]",
                                           "ntz: timestamp[us]", "dec: decimal128(10, 2)"}));
  EXPECT_FALSE(PrimitiveColumns("{", {}).ok());
  EXPECT_FALSE(PrimitiveColumns(R"({"fields":[{"type":"long"}]})", {}).ok());
}

TEST(PrimitiveColumnsTest, DecimalNamesOutOfRangeOrMalformedAreNotColumns) {
  const char kDecimals[] =
      R"j({"type":"struct","fields":[)j"
      R"j({"name":"a","type":"decimal( 5 , 1 )"},{"name":"b","type":"decimal(38,38)"},)j"
      R"j({"name":"huge","type":"decimal(99999999999999999999,2)"},)j"
      R"j({"name":"neg","type":"decimal(-3,1)"},{"name":"wide","type":"decimal(39,0)"},)j"
      R"j({"name":"open","type":"decimal(10,2"},{"name":"empty","type":"decimal(,2)"},)j"
      R"j({"name":"tail","type":"decimal(5,1)x"},{"name":"plus","type":"decimal(+5,1)"},)j"
      R"j({"name":"three","type":"decimal(5,1,0)"}]})j";
  auto columns = PrimitiveColumns(kDecimals, {});
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  std::vector<std::string> got;
  for (const auto& field : *columns) got.push_back(field->ToString());
  EXPECT_EQ(got, (std::vector<std::string>{"a: decimal128(5, 1)", "b: decimal128(38, 38)"}));
}

}  // namespace
}  // namespace shardfeed
