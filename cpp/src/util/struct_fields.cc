#include "util/struct_fields.h"

#include <algorithm>

#include <arrow/array.h>
#include <arrow/chunked_array.h>
#include <arrow/compute/cast.h>
#include <arrow/compute/initialize.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "shardfeed/status.h"
#include "util/memory.h"
#include "util/read_properties.h"

namespace shardfeed {

namespace {

bool IsStruct(const parquet::arrow::SchemaField& node) {
  return node.field && node.field->type()->id() == arrow::Type::STRUCT && !node.children.empty();
}

// Whether arrays of type `id` are lists of their one child (a map is a list
// of key-value structs).
bool IsListOfOne(arrow::Type::type id) {
  return id == arrow::Type::LIST || id == arrow::Type::LARGE_LIST || id == arrow::Type::MAP ||
         id == arrow::Type::FIXED_SIZE_LIST || id == arrow::Type::LIST_VIEW ||
         id == arrow::Type::LARGE_LIST_VIEW;
}

// A list of the same kind as `list` (list, large list, or fixed-size list of
// its size; a map's entries make a list) with elements `element`.
std::shared_ptr<arrow::DataType> ListLike(const arrow::DataType& list,
                                          std::shared_ptr<arrow::Field> element) {
  switch (list.id()) {
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LARGE_LIST_VIEW:  // a view is read as the list it is (convert.h)
      return arrow::large_list(std::move(element));
    case arrow::Type::FIXED_SIZE_LIST:
      return arrow::fixed_size_list(std::move(element),
                                    static_cast<const arrow::FixedSizeListType&>(list).list_size());
    default:
      return arrow::list(std::move(element));
  }
}

// The struct elements of a list of structs (or a map's entries), else null.
const parquet::arrow::SchemaField* StructElements(const parquet::arrow::SchemaField& node) {
  if (!node.field || node.children.size() != 1) return nullptr;
  if (!IsListOfOne(node.field->type()->id())) return nullptr;
  return IsStruct(node.children[0]) ? &node.children[0] : nullptr;
}

// Where the flattening stands: below the top-level field `top`, at `path`,
// inside the list `list` (a list of structs; its elements at path[list_at]).
struct At {
  int top = 0;
  std::vector<std::string> path;
  std::string name;
  bool nullable = false;  // a struct above (or the list) may be null
  const parquet::arrow::SchemaField* list = nullptr;
  int list_at = -1;
  bool element_null = false;  // inside the list: an element (or a struct in it) may be null
};

void Flatten(const parquet::arrow::SchemaField& node, At* at, std::vector<FlatField>* out);

void FlattenChildren(const parquet::arrow::SchemaField& parent, At* at,
                     std::vector<FlatField>* out) {
  const std::string name = at->name;
  for (const auto& child : parent.children) {
    at->path.push_back(child.field->name());
    at->name = name + "." + child.field->name();
    Flatten(child, at, out);
    at->path.pop_back();
  }
  at->name = name;
}

// Appends the columns of `node`.
void Flatten(const parquet::arrow::SchemaField& node, At* at, std::vector<FlatField>* out) {
  const At saved = *at;
  (at->list ? at->element_null : at->nullable) |= node.field->nullable();
  if (IsStruct(node)) {
    FlattenChildren(node, at, out);
  } else if (const auto* elements = at->list ? nullptr : StructElements(node)) {
    // A list of structs: each field of its elements a list of its own.
    at->list = &node;
    at->list_at = static_cast<int>(at->path.size());
    at->element_null = elements->field->nullable();
    FlattenChildren(*elements, at, out);
  } else {
    FlatField flat;
    flat.node = &node;
    flat.top = at->top;
    flat.path = at->path;
    flat.list_at = at->list_at;
    if (at->path.empty()) {
      flat.field = node.field;
    } else if (!at->list) {
      flat.field = node.field->WithName(at->name)->WithNullable(at->nullable);
    } else {
      auto element = node.field->WithName("element")->WithNullable(at->element_null);
      flat.field = arrow::field(at->name, ListLike(*at->list->field->type(), std::move(element)),
                                at->nullable);
    }
    out->push_back(std::move(flat));
  }
  *at = saved;
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

// Field `f` of a chunk of its top-level column: the struct steps of its path;
// at a list of structs, the rest of the path from the elements, as a list
// with the list's offsets and nulls.
arrow::Result<std::shared_ptr<arrow::Array>> Extract(std::shared_ptr<arrow::Array> chunk,
                                                     const FlatField& f) {
  for (size_t k = 0; k < f.path.size(); ++k) {
    if (static_cast<int>(k) != f.list_at) {
      ARROW_ASSIGN_OR_RAISE(chunk, Child(chunk, f.path[k]));
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(chunk, ViewAsList(std::move(chunk)));
    const auto id = chunk->type_id();
    if (!IsListOfOne(id)) {
      return Error(ErrorKind::kInvalidData,
                   "'" + f.path[k] + "': its list was read as " + chunk->type()->ToString());
    }
    // (A MapArray is a ListArray.)  Each kind's values whole: the chunk's
    // offsets (or its offset times the fixed size) still index them.
    auto values = id == arrow::Type::LARGE_LIST
                      ? static_cast<const arrow::LargeListArray&>(*chunk).values()
                  : id == arrow::Type::FIXED_SIZE_LIST
                      ? static_cast<const arrow::FixedSizeListArray&>(*chunk).values()
                      : static_cast<const arrow::ListArray&>(*chunk).values();
    for (size_t j = k; j < f.path.size(); ++j) {
      ARROW_ASSIGN_OR_RAISE(values, Child(values, f.path[j]));
    }
    const bool element_null =
        !arrow::is_list(f.field->type()->id()) ||
        static_cast<const arrow::BaseListType&>(*f.field->type()).value_field()->nullable();
    auto element = arrow::field("element", values->type(), element_null);
    auto data = chunk->data()->Copy();
    data->type = ListLike(*chunk->type(), std::move(element));
    data->child_data = {values->data()};
    return arrow::MakeArray(std::move(data));
  }
  return chunk;
}

}  // namespace

std::vector<FlatField> FlattenStructs(const parquet::arrow::SchemaManifest& manifest) {
  std::vector<FlatField> out;
  out.reserve(manifest.schema_fields.size());
  for (size_t i = 0; i < manifest.schema_fields.size(); ++i) {
    const auto& node = manifest.schema_fields[i];
    if (!node.field) continue;
    At at;
    at.top = static_cast<int>(i);
    at.name = node.field->name();
    Flatten(node, &at, &out);
  }
  return out;
}

std::shared_ptr<arrow::Schema> FlatSchema(const parquet::arrow::SchemaManifest& manifest) {
  arrow::FieldVector fields;
  for (auto& flat : FlattenStructs(manifest)) fields.push_back(std::move(flat.field));
  return arrow::schema(std::move(fields));
}

bool HasStructs(const parquet::arrow::SchemaManifest& manifest) {
  return std::any_of(manifest.schema_fields.begin(), manifest.schema_fields.end(),
                     [](const auto& node) { return IsStruct(node) || StructElements(node); });
}

arrow::Result<parquet::arrow::SchemaManifest> MakeManifest(const parquet::FileMetaData& metadata) {
  parquet::arrow::SchemaManifest manifest;
  ARROW_RETURN_NOT_OK(parquet::arrow::SchemaManifest::Make(
      metadata.schema(), metadata.key_value_metadata(), ArrowReadDefaults(), &manifest));
  return manifest;
}

arrow::Result<std::shared_ptr<arrow::Array>> ViewAsList(std::shared_ptr<arrow::Array> array) {
  const auto id = array->type_id();
  if (id != arrow::Type::LIST_VIEW && id != arrow::Type::LARGE_LIST_VIEW) return array;
  static const arrow::Status compute_ready = arrow::compute::Initialize();  // once per process
  ARROW_RETURN_NOT_OK(compute_ready);
  const auto& element = static_cast<const arrow::BaseListType&>(*array->type()).value_field();
  arrow::compute::ExecContext context(EnginePool());
  return arrow::compute::Cast(*array, ListLike(*array->type(), element),
                              arrow::compute::CastOptions::Safe(), &context);
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
    for (const auto& chunk : column->chunks()) {
      ARROW_ASSIGN_OR_RAISE(auto field, Extract(chunk, *f));
      chunks.push_back(std::move(field));
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
