#include "util/struct_fields.h"

#include <gtest/gtest.h>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/json/from_string.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>

namespace shardfeed {
namespace {

std::shared_ptr<arrow::Array> Json(const std::shared_ptr<arrow::DataType>& type,
                                   const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

// The table as a Parquet file in memory, in row groups of `rows`; with the
// Arrow schema beside it (as pyarrow writes), which alone keeps a list's fixed size.
std::shared_ptr<arrow::Buffer> ToParquet(const arrow::Table& table, int64_t rows,
                                         bool store_schema = false) {
  auto sink = arrow::io::BufferOutputStream::Create().ValueOrDie();
  parquet::ArrowWriterProperties::Builder arrow_props;
  if (store_schema) arrow_props.store_schema();
  EXPECT_TRUE(parquet::arrow::WriteTable(table, arrow::default_memory_pool(), sink, rows,
                                         parquet::default_writer_properties(), arrow_props.build())
                  .ok());
  return sink->Finish().ValueOrDie();
}

// s: struct<a: int32 not null, in: struct<b: float>> (nullable), x: int64;
// s is null in row 1, s.in in row 2.
std::shared_ptr<arrow::Buffer> StructFile() {
  auto in_type = arrow::struct_({arrow::field("b", arrow::float32())});
  auto s_type = arrow::struct_(
      {arrow::field("a", arrow::int32(), /*nullable=*/false), arrow::field("in", in_type)});
  auto s = Json(s_type, R"([{"a": 1, "in": {"b": 0.5}}, null, {"a": 3, "in": null}])");
  auto x = Json(arrow::int64(), "[7, 8, 9]");
  auto schema = arrow::schema(
      arrow::FieldVector{arrow::field("s", s_type), arrow::field("x", arrow::int64())});
  auto table = arrow::Table::Make(schema, arrow::ArrayVector{s, x});
  return ToParquet(*table, 3);
}

std::unique_ptr<parquet::arrow::FileReader> Open(const std::shared_ptr<arrow::Buffer>& data) {
  return parquet::arrow::OpenFile(std::make_shared<arrow::io::BufferReader>(data),
                                  arrow::default_memory_pool())
      .ValueOrDie();
}

TEST(StructFields, FlattenedByPathInSchemaOrder) {
  auto reader = Open(StructFile());
  const auto& manifest = reader->manifest();
  EXPECT_TRUE(HasStructs(manifest));
  const auto flat = FlattenStructs(manifest);
  ASSERT_EQ(flat.size(), 3u);
  EXPECT_EQ(flat[0].field->name(), "s.a");
  EXPECT_TRUE(flat[0].field->nullable());  // a not-null field of a nullable struct
  EXPECT_EQ(flat[0].path, (std::vector<std::string>{"a"}));
  EXPECT_EQ(flat[1].field->name(), "s.in.b");
  EXPECT_EQ(flat[1].path, (std::vector<std::string>{"in", "b"}));
  EXPECT_EQ(flat[2].field->name(), "x");
  EXPECT_TRUE(flat[2].path.empty());
  EXPECT_EQ(flat[2].top, 1);
  EXPECT_EQ(FlatSchema(manifest)->field(1)->name(), "s.in.b");
}

TEST(StructFields, ReadsEachFieldWithTheNullsOfTheStructsAboveIt) {
  auto reader = Open(StructFile());
  const auto flat = FlattenStructs(reader->manifest());
  // Out of schema order, two fields of one struct and a top-level column.
  auto table = ReadFlatFields(*reader, 0, {&flat[2], &flat[1], &flat[0]});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ((*table)->num_columns(), 3);
  EXPECT_EQ((*table)->field(0)->name(), "x");
  EXPECT_EQ((*table)->field(1)->name(), "s.in.b");
  EXPECT_EQ((*table)->field(2)->name(), "s.a");
  auto b = (*table)->column(1)->chunk(0);
  EXPECT_TRUE(b->IsValid(0));
  EXPECT_TRUE(b->IsNull(1));  // s is null
  EXPECT_TRUE(b->IsNull(2));  // s.in is null
  auto a = (*table)->column(2)->chunk(0);
  EXPECT_EQ(a->null_count(), 1);  // not null in the file, but its struct is
  EXPECT_TRUE(a->IsNull(1));
  EXPECT_EQ(std::static_pointer_cast<arrow::Int32Array>(a)->Value(2), 3);
  EXPECT_EQ(std::static_pointer_cast<arrow::Int64Array>((*table)->column(0)->chunk(0))->Value(1),
            8);
}

TEST(StructFields, AListOfStructsIsAListPerField) {
  auto element = arrow::struct_({arrow::field("id", arrow::int64()),
                                 arrow::field("p", arrow::float32(), /*nullable=*/false)});
  auto items_type = arrow::list(arrow::field("element", element));
  // A list of two, a null list, a list with a null element, an empty list.
  auto items = Json(items_type,
                    R"([[{"id": 1, "p": 0.5}, {"id": null, "p": 1.5}], null,
                        [null, {"id": 4, "p": 2.5}], []])");
  auto schema = arrow::schema(arrow::FieldVector{arrow::field("items", items_type)});
  auto table = arrow::Table::Make(schema, arrow::ArrayVector{items});
  auto reader = Open(ToParquet(*table, 4));
  EXPECT_TRUE(HasStructs(reader->manifest()));
  const auto flat = FlattenStructs(reader->manifest());
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].field->name(), "items.id");
  EXPECT_EQ(flat[0].field->type()->ToString(), "list<element: int64>");
  EXPECT_EQ(flat[1].field->name(), "items.p");
  EXPECT_EQ(flat[0].list_at, 0);
  // Element nulls: a null struct element makes its not-null field null too.
  EXPECT_TRUE(
      static_cast<const arrow::ListType&>(*flat[1].field->type()).value_field()->nullable());
  auto read = ReadFlatFields(*reader, 0, {&flat[1], &flat[0]});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto& ids = static_cast<const arrow::ListArray&>(*(*read)->column(1)->chunk(0));
  ASSERT_EQ(ids.length(), 4);
  EXPECT_TRUE(ids.IsNull(1));
  EXPECT_EQ(ids.value_length(0), 2);
  EXPECT_EQ(ids.value_length(2), 2);
  EXPECT_EQ(ids.value_length(3), 0);
  const auto& id_values = static_cast<const arrow::Int64Array&>(*ids.values());
  EXPECT_EQ(id_values.Value(ids.value_offset(0)), 1);
  EXPECT_TRUE(id_values.IsNull(ids.value_offset(0) + 1));  // a null field
  EXPECT_TRUE(id_values.IsNull(ids.value_offset(2)));      // a null element
  EXPECT_EQ(id_values.Value(ids.value_offset(2) + 1), 4);
  const auto& ps = static_cast<const arrow::ListArray&>(*(*read)->column(0)->chunk(0));
  EXPECT_TRUE(ps.values()->IsNull(ps.value_offset(2)));  // not null, but its element is
  EXPECT_EQ(static_cast<const arrow::FloatArray&>(*ps.values()).Value(ps.value_offset(2) + 1),
            2.5f);
}

TEST(StructFields, AFixedSizeListOfStructsIsAFixedSizeListPerField) {
  auto element = arrow::struct_({arrow::field("id", arrow::int64())});
  auto points_type = arrow::fixed_size_list(arrow::field("element", element), 2);
  // A null element, a null list, and a full one, read from the second row group.
  auto points = Json(
      points_type, R"([[{"id": 9}, {"id": 9}], [{"id": 1}, null], null, [{"id": 3}, {"id": 4}]])");
  auto schema = arrow::schema(arrow::FieldVector{arrow::field("p", points_type)});
  auto table = arrow::Table::Make(schema, arrow::ArrayVector{points});
  auto reader = Open(ToParquet(*table, 1, /*store_schema=*/true));
  EXPECT_TRUE(HasStructs(reader->manifest()));
  const auto flat = FlattenStructs(reader->manifest());
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].field->name(), "p.id");
  EXPECT_EQ(flat[0].field->type()->ToString(), "fixed_size_list<element: int64>[2]");
  for (int rg = 1; rg < 4; ++rg) {
    auto read = ReadFlatFields(*reader, rg, {&flat[0]});
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    const auto& ids = static_cast<const arrow::FixedSizeListArray&>(*(*read)->column(0)->chunk(0));
    ASSERT_EQ(ids.length(), 1);
    const auto& values = static_cast<const arrow::Int64Array&>(*ids.values());
    const int64_t at = ids.value_offset(0);
    if (rg == 1) {
      EXPECT_EQ(values.Value(at), 1);
      EXPECT_TRUE(values.IsNull(at + 1));  // a null element's field
    } else if (rg == 2) {
      EXPECT_TRUE(ids.IsNull(0));
    } else {
      EXPECT_EQ(values.Value(at), 3);
      EXPECT_EQ(values.Value(at + 1), 4);
    }
  }
}

TEST(StructFields, AMapIsItsKeysAndItsValues) {
  auto type = arrow::map(arrow::utf8(), arrow::float64());
  auto m = Json(type, R"([[["a", 1.5], ["b", null]], null, []])");
  auto table = arrow::Table::Make(arrow::schema(arrow::FieldVector{arrow::field("m", type)}),
                                  arrow::ArrayVector{m});
  auto reader = Open(ToParquet(*table, 3));
  const auto flat = FlattenStructs(reader->manifest());
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].field->name(), "m.key");
  EXPECT_EQ(flat[0].field->type()->ToString(), "list<element: string not null>");
  EXPECT_EQ(flat[1].field->name(), "m.value");
  auto read = ReadFlatFields(*reader, 0, {&flat[0], &flat[1]});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto& keys = static_cast<const arrow::ListArray&>(*(*read)->column(0)->chunk(0));
  const auto& values = static_cast<const arrow::ListArray&>(*(*read)->column(1)->chunk(0));
  EXPECT_EQ(keys.type_id(), arrow::Type::LIST);
  EXPECT_EQ(keys.value_length(0), 2);
  EXPECT_TRUE(keys.IsNull(1));
  EXPECT_EQ(values.value_length(2), 0);
  EXPECT_EQ(
      static_cast<const arrow::StringArray&>(*keys.values()).GetView(keys.value_offset(0) + 1),
      "b");
  EXPECT_EQ(static_cast<const arrow::DoubleArray&>(*values.values()).Value(values.value_offset(0)),
            1.5);
  EXPECT_TRUE(values.values()->IsNull(values.value_offset(0) + 1));
}

TEST(StructFields, AFileWithoutStructsIsItsTopLevel) {
  auto x = Json(arrow::int64(), "[1, 2]");
  auto l = Json(arrow::list(arrow::int32()), "[[1], null]");
  auto schema = arrow::schema(
      arrow::FieldVector{arrow::field("x", arrow::int64()), arrow::field("l", l->type())});
  auto table = arrow::Table::Make(schema, arrow::ArrayVector{x, l});
  auto reader = Open(ToParquet(*table, 2));
  EXPECT_FALSE(HasStructs(reader->manifest()));
  const auto flat = FlattenStructs(reader->manifest());
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[1].field.get(), reader->manifest().schema_fields[1].field.get());
  auto read = ReadFlatFields(*reader, 0, {&flat[1]});
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)->column(0)->type()->id(), arrow::Type::LIST);
}

}  // namespace
}  // namespace shardfeed
