#include "util/struct_fields.h"

#include <algorithm>

#include <arrow/array.h>
#include <arrow/chunked_array.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "shardfeed/status.h"
#include "util/read_properties.h"

namespace shardfeed {

namespace {

bool IsStruct(const parquet::arrow::SchemaField& node) {
  return node.field && node.field->type()->id() == arrow::Type::STRUCT && !node.children.empty();
}

// Appends the columns of `node` (below the top-level field `top`, at `path`).
void Flatten(const parquet::arrow::SchemaField& node, int top, std::vector<std::string>* path,
             const std::string& name, bool nullable, std::vector<FlatField>* out) {
  const bool any_null = nullable || node.field->nullable();
  if (IsStruct(node)) {
    for (const auto& child : node.children) {
      path->push_back(child.field->name());
      Flatten(child, top, path, name + "." + child.field->name(), any_null, out);
      path->pop_back();
    }
    return;
  }
  FlatField flat;
  flat.node = &node;
  flat.top = top;
  flat.path = *path;
  flat.field = path->empty() ? node.field : node.field->WithName(name)->WithNullable(any_null);
  out->push_back(std::move(flat));
}

// The child named `name` of a struct chunk, with the struct's nulls merged in.
arrow::Result<std::shared_ptr<arrow::Array>> Child(const std::shared_ptr<arrow::Array>& chunk,
                                                   const std::string& name) {
  if (chunk->type_id() != arrow::Type::STRUCT) {
    return Error(ErrorKind::kInvalidData,
                 "'" + name + "': its struct was read as " + chunk->type()->ToString());
  }
  const auto& st = static_cast<const arrow::StructArray&>(*chunk);
  const auto& type = static_cast<const arrow::StructType&>(*st.type());
  const auto at = type.GetAllFieldIndices(name);
  if (at.size() != 1) {
    return Error(ErrorKind::kSchemaMismatch,
                 "a struct has " + std::to_string(at.size()) + " fields named '" + name + "'");
  }
  return st.GetFlattenedField(at[0]);
}

}  // namespace

std::vector<FlatField> FlattenStructs(const parquet::arrow::SchemaManifest& manifest) {
  std::vector<FlatField> out;
  out.reserve(manifest.schema_fields.size());
  std::vector<std::string> path;
  for (size_t i = 0; i < manifest.schema_fields.size(); ++i) {
    const auto& node = manifest.schema_fields[i];
    if (!node.field) continue;
    Flatten(node, static_cast<int>(i), &path, node.field->name(), false, &out);
  }
  return out;
}

std::shared_ptr<arrow::Schema> FlatSchema(const parquet::arrow::SchemaManifest& manifest) {
  arrow::FieldVector fields;
  for (auto& flat : FlattenStructs(manifest)) fields.push_back(std::move(flat.field));
  return arrow::schema(std::move(fields));
}

bool HasStructs(const parquet::arrow::SchemaManifest& manifest) {
  return std::any_of(manifest.schema_fields.begin(), manifest.schema_fields.end(), IsStruct);
}

arrow::Result<parquet::arrow::SchemaManifest> MakeManifest(const parquet::FileMetaData& metadata) {
  parquet::arrow::SchemaManifest manifest;
  ARROW_RETURN_NOT_OK(parquet::arrow::SchemaManifest::Make(
      metadata.schema(), metadata.key_value_metadata(), ArrowReadDefaults(), &manifest));
  return manifest;
}

void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>* out) {
  if (field.is_leaf()) {
    out->push_back(field.column_index);
    return;
  }
  for (const auto& child : field.children) CollectLeaves(child, out);
}

arrow::Result<std::shared_ptr<arrow::Table>> ReadFlatFields(
    parquet::arrow::FileReader& reader, int row_group,
    const std::vector<const FlatField*>& fields) {
  const auto& tops_of_file = reader.manifest().schema_fields;
  std::vector<int> leaves;
  std::vector<int> tops;  // the read table's columns: top-level fields by first leaf
  bool nested = false;
  for (const FlatField* f : fields) {
    CollectLeaves(*f->node, &leaves);
    if (std::find(tops.begin(), tops.end(), f->top) == tops.end()) tops.push_back(f->top);
    nested = nested || !f->path.empty();
  }
  ARROW_ASSIGN_OR_RAISE(auto table, reader.ReadRowGroup(row_group, leaves));
  if (!nested && tops.size() == fields.size()) return table;  // one column per field already
  if (table->num_columns() != static_cast<int>(tops.size())) {
    return Error(ErrorKind::kInvalidData, "read " + std::to_string(table->num_columns()) +
                                              " columns for " + std::to_string(tops.size()) +
                                              " top-level fields");
  }
  arrow::FieldVector out_fields;
  arrow::ChunkedArrayVector out_columns;
  for (const FlatField* f : fields) {
    const auto pos = std::find(tops.begin(), tops.end(), f->top) - tops.begin();
    const auto& column = table->column(static_cast<int>(pos));
    const auto& top_name = tops_of_file[static_cast<size_t>(f->top)].field->name();
    if (table->field(static_cast<int>(pos))->name() != top_name) {
      return Error(ErrorKind::kInvalidData, "column '" + top_name + "' read as '" +
                                                table->field(static_cast<int>(pos))->name() + "'");
    }
    arrow::ArrayVector chunks;
    for (auto chunk : column->chunks()) {
      for (const auto& name : f->path) {
        ARROW_ASSIGN_OR_RAISE(chunk, Child(chunk, name));
      }
      chunks.push_back(std::move(chunk));
    }
    // (As read: a string field read as a dictionary is one.)
    auto type = chunks.empty() ? f->field->type() : chunks[0]->type();
    ARROW_ASSIGN_OR_RAISE(auto chunked, arrow::ChunkedArray::Make(std::move(chunks), type));
    out_fields.push_back(f->field->WithType(std::move(type)));
    out_columns.push_back(std::move(chunked));
  }
  return arrow::Table::Make(arrow::schema(std::move(out_fields)), std::move(out_columns),
                            table->num_rows());
}

}  // namespace shardfeed
