// A Parquet file's columns with struct fields flattened (internal): each
// field of a struct (`user` with `age`, `city`) is a column of its own,
// named by its path (`user.age`, `user.city`), as Spark's `select("user.age")`
// reads it.  Structs within structs are flattened too, and so is a list of
// structs (`items`: list<struct<id, price>>): each field of its elements is a
// list of its own (`items.id`: list<id>, with the list's nulls and lengths),
// as Spark's `select("items.id")` reads it (a fixed-size list of structs gives
// fixed-size lists of each field).  A map is a list of key-value
// structs: `m.key` and `m.value` are its keys and its values, as lists
// (Spark's map_keys and map_values).  A struct deeper in lists (a list inside
// a list of structs, a list of lists) stays part of that column.  The catalog's schema, the files'
// field maps and every reader index a file's columns this way, so a file without structs has the
// columns it always had.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>
#include <parquet/arrow/schema.h>

namespace parquet {
class FileMetaData;
namespace arrow {
class FileReader;
}  // namespace arrow
}  // namespace parquet

namespace shardfeed {

struct FlatField {
  const parquet::arrow::SchemaField* node = nullptr;  // in the manifest it was made from
  int top = 0;                                        // the file's top-level field it lies in
  std::vector<std::string> path;  // the names below that field (none: a top-level column)
  // Where a list of structs is crossed: path[list_at] is a field of its
  // elements, and the column is a list of that field (-1: no list).
  int list_at = -1;
  std::shared_ptr<arrow::Field> field;  // named by the dotted path; nullable when any step is
};

// The file's columns, structs flattened, in schema order.
std::vector<FlatField> FlattenStructs(const parquet::arrow::SchemaManifest& manifest);

// The same columns as an Arrow schema (what FlattenStructs' fields say).
std::shared_ptr<arrow::Schema> FlatSchema(const parquet::arrow::SchemaManifest& manifest);

// Whether any top-level field is a struct (else FlattenStructs is the top level).
bool HasStructs(const parquet::arrow::SchemaManifest& manifest);

// The manifest of a footer's schema, as every reader of the dataset maps it.
arrow::Result<parquet::arrow::SchemaManifest> MakeManifest(const parquet::FileMetaData& metadata);

// A list_view (large_list_view) array as the list (large list) of the same
// elements: views may overlap and come in any order.  Other arrays as they are.
arrow::Result<std::shared_ptr<arrow::Array>> ViewAsList(std::shared_ptr<arrow::Array> array);

// The leaf columns (Parquet column indices) below a field, in order.
void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>* out);

// Reads row group `row_group` of `fields` (of the reader's manifest) and
// returns one column per field, in that order, named as the fields are: a
// struct's field comes out on its own, null where the struct is null.
arrow::Result<std::shared_ptr<arrow::Table>> ReadFlatFields(
    parquet::arrow::FileReader& reader, int row_group, const std::vector<const FlatField*>& fields);

}  // namespace shardfeed
