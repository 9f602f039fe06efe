// BuildVocabulary: one pass over one string column of every row group.
#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include <arrow/array.h>
#include <arrow/extension_type.h>
#include <arrow/scalar.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "catalog/convert.h"
#include "catalog/deletion_vector.h"
#include "catalog/unify.h"
#include "shardfeed/status.h"
#include "shardfeed/vocabulary.h"
#include "util/hash.h"
#include "util/memory.h"
#include "util/read_properties.h"
#include "util/string_array.h"
#include "util/struct_fields.h"

namespace shardfeed {

namespace {

struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return StringHash64(s); }
};
// Counts per distinct value; looked up by string_view, so a row costs no copy.
using Counts = std::unordered_map<std::string, int64_t, Hash, std::equal_to<>>;

void Add(Counts* counts, std::string_view value, int64_t n) {
  auto it = counts->find(value);
  if (it == counts->end()) {
    counts->emplace(std::string(value), n);
  } else {
    it->second += n;
  }
}

arrow::Status CountArray(const arrow::Array& array, Counts* counts) {
  if (array.type_id() == arrow::Type::EXTENSION) {  // arrow.json: its strings
    return CountArray(*static_cast<const arrow::ExtensionArray&>(array).storage(), counts);
  }
  if (arrow::is_list(array.type_id()) || array.type_id() == arrow::Type::FIXED_SIZE_LIST) {
    // A list of strings: its elements, those of null lists left out (fixed-size
    // lists inside it are their strings, as the catalog types them).
    ARROW_ASSIGN_OR_RAISE(auto list, CollapseFixedLists(arrow::MakeArray(array.data())));
    arrow::Result<std::shared_ptr<arrow::Array>> values;
    switch (list->type_id()) {
      case arrow::Type::LIST:
        values = static_cast<const arrow::ListArray&>(*list).Flatten(EnginePool());
        break;
      case arrow::Type::LARGE_LIST:
        values = static_cast<const arrow::LargeListArray&>(*list).Flatten(EnginePool());
        break;
      default:
        values = static_cast<const arrow::FixedSizeListArray&>(*list).Flatten(EnginePool());
    }
    ARROW_RETURN_NOT_OK(values.status());
    if (arrow::is_list_like((*values)->type_id())) {
      return Error(ErrorKind::kUnsupportedType, "nested lists are not supported");
    }
    return CountArray(**values, counts);
  }
  if (IsStringDictionary(array)) {
    // Rows are counted per index; each distinct value is then added once.
    const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
    const auto& values = *dict.dictionary();
    std::vector<int64_t> per_index(static_cast<size_t>(values.length()), 0);
    bool bad = false;
    ForEachDictionaryIndex(dict, [&](int64_t i, int64_t k) {
      if (dict.IsNull(i)) return;
      if (k < 0 || k >= values.length()) {
        bad = true;
        return;
      }
      ++per_index[static_cast<size_t>(k)];
    });
    if (bad) return Error(ErrorKind::kInvalidData, "dictionary index out of range");
    for (int64_t k = 0; k < values.length(); ++k) {
      if (per_index[static_cast<size_t>(k)] > 0 && values.IsValid(k)) {
        Add(counts, StringAt(values, k), per_index[static_cast<size_t>(k)]);
      }
    }
    return arrow::Status::OK();
  }
  if (!IsStringLike(array.type_id())) {
    return Error(ErrorKind::kUnsupportedType, "expected strings, got " + array.type()->ToString());
  }
  for (int64_t i = 0; i < array.length(); ++i) {
    if (array.IsValid(i)) Add(counts, StringAt(array, i), 1);
  }
  return arrow::Status::OK();
}

bool IsUtf8(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::STRING_VIEW;
}

// Counts the column's values in every row group of file `f` (not in the rows
// its Delta deletion vector deletes).
arrow::Status CountFile(const Catalog& catalog, int32_t f, int dataset_field, Counts* counts) {
  const auto& file = catalog.files()[static_cast<size_t>(f)];
  const std::string context = "file '" + file.rel_path + "'";
  const int field =
      file.field_map.empty() ? dataset_field : file.field_map[static_cast<size_t>(dataset_field)];
  if (field < 0) {
    // Not in this file: a Hive partition value for each of its rows, or nulls.
    const auto& keys = catalog.partition_schema();
    const int key = keys ? keys->GetFieldIndex(catalog.schema()->field(dataset_field)->name()) : -1;
    if (key < 0 || static_cast<size_t>(key) >= file.partition_values.size()) {
      return arrow::Status::OK();
    }
    const auto& value = file.partition_values[static_cast<size_t>(key)];
    if (!value || !value->is_valid) return arrow::Status::OK();
    if (!IsStringLike(value->type->id())) {
      return Error(ErrorKind::kUnsupportedType, context + ": partition value is not a string");
    }
    int64_t rows = file.deleted ? -file.deleted->count : 0;
    for (const auto& rg : catalog.row_groups()) {
      if (rg.file == f) rows += rg.num_rows;
    }
    if (rows > 0) Add(counts, static_cast<const arrow::BaseBinaryScalar&>(*value).view(), rows);
    return arrow::Status::OK();
  }
  arrow::fs::FileInfo info(file.path, arrow::fs::FileType::File);
  info.set_size(file.size);
  auto input = catalog.filesystem()->OpenInputFile(info);
  if (!input.ok()) return WithContext(input.status(), context);
  try {
    parquet::ArrowReaderProperties props = ArrowReadDefaults();
    props.set_use_threads(false);
    props.set_pre_buffer(true);
    parquet::arrow::SchemaManifest manifest;
    ARROW_RETURN_NOT_OK(parquet::arrow::SchemaManifest::Make(
        file.metadata->schema(), file.metadata->key_value_metadata(), props, &manifest));
    const auto flat = FlattenStructs(manifest);  // the file's fields, as field_map counts them
    if (static_cast<size_t>(field) >= flat.size()) {
      return Error(ErrorKind::kUnsupportedType, context + ": column is not a string column");
    }
    // The column's leaf: its own, or a list's elements' (lists of fixed-size
    // lists too, whose values CountArray counts).
    const FlatField& column = flat[static_cast<size_t>(field)];
    const parquet::arrow::SchemaField* node = column.node;
    while (!node->is_leaf() && node->children.size() == 1 &&
           arrow::is_list_like(node->field->type()->id())) {
      node = &node->children[0];
    }
    if (!node->is_leaf()) {
      return Error(ErrorKind::kUnsupportedType,
                   context + ": column is not a string column or a list of strings");
    }
    const int leaf = node->column_index;
    // Plain string columns decode straight into a dictionary per row group,
    // so each row costs an index, not a string.
    props.set_read_dictionary(leaf, true);
    int64_t file_row = 0;  // the row group's first row in the file
    for (const auto& rg : catalog.row_groups()) {
      if (rg.file != f) continue;
      const auto live = LiveRuns(file.deleted.get(), file_row, file_row + rg.num_rows);
      file_row += rg.num_rows;
      if (live.empty()) continue;
      const std::string rg_context = context + ", row group " + std::to_string(rg.row_group);
      // A reader per row group, over its own footer (where it is row group 0).
      auto footer = RowGroupFooter(rg);
      if (!footer.ok()) return WithContext(footer.status(), rg_context);
      auto pq = parquet::ParquetFileReader::Open(*input, parquet::ReaderProperties(EnginePool()),
                                                 *footer);
      ARROW_ASSIGN_OR_RAISE(auto reader,
                            parquet::arrow::FileReader::Make(EnginePool(), std::move(pq), props));
      auto table = ReadFlatFields(*reader, 0, {&column});
      if (!table.ok()) return WithContext(table.status(), rg_context);
      const int64_t first = file_row - rg.num_rows;
      for (const auto& run : live) {
        const auto rows = (*table)->column(0)->Slice(run.begin - first, run.end - run.begin);
        for (const auto& chunk : rows->chunks()) {
          ARROW_RETURN_NOT_OK(WithContext(CountArray(*chunk, counts), rg_context));
        }
      }
    }
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData, context + ": " + e.what());
  }
  return arrow::Status::OK();
}

}  // namespace

const arrow::DataType& VocabularyValueType(const arrow::DataType& type) {
  const arrow::DataType* values_type = &type;
  if (arrow::is_list(type.id()) || type.id() == arrow::Type::FIXED_SIZE_LIST) {
    values_type = static_cast<const arrow::BaseListType&>(type).value_type().get();
  }
  if (values_type->id() == arrow::Type::DICTIONARY) {
    values_type = static_cast<const arrow::DictionaryType&>(*values_type).value_type().get();
  }
  return *values_type;
}

bool VocabularyOfText(const arrow::DataType& type) {
  return IsUtf8(VocabularyValueType(type).id());
}

arrow::Result<std::vector<std::string>> BuildVocabulary(const Catalog& catalog,
                                                        const std::string& column,
                                                        const VocabularyOptions& options) {
  if (options.min_count < 1) {
    return Error(ErrorKind::kInvalidArgument, "min_count must be >= 1");
  }
  if (options.max_size && *options.max_size < 0) {
    return Error(ErrorKind::kInvalidArgument, "max_size must be >= 0");
  }
  if (options.num_threads < 1) {
    return Error(ErrorKind::kInvalidArgument, "num_threads must be >= 1");
  }
  const int field = catalog.schema()->GetFieldIndex(column);
  if (field < 0) {
    return Error(ErrorKind::kColumnNotFound,
                 "vocabulary: column '" + column + "' is not in the dataset (or is ambiguous)");
  }
  const auto& metadata = catalog.schema()->field(field)->metadata();
  if (metadata && metadata->Contains(kConflictKey)) {
    return Error(ErrorKind::kSchemaMismatch, metadata->Get(kConflictKey).ValueOr(""));
  }
  const auto& type = catalog.schema()->field(field)->type();
  if (!IsStringLike(VocabularyValueType(*type).id())) {
    return Error(ErrorKind::kUnsupportedType,
                 "vocabulary: column '" + column + "' has type " + type->ToString() +
                     "; a vocabulary is built from string or binary columns (large, view, "
                     "fixed-size or dictionary-encoded too), or lists of them");
  }

  // Files in parallel, each into its own counts; the sum does not depend on
  // which thread counted what.
  const auto num_files = static_cast<int32_t>(catalog.files().size());
  const int threads = std::max(1, std::min<int>(options.num_threads, num_files));
  std::vector<Counts> counts(static_cast<size_t>(threads));
  std::vector<arrow::Status> errors(static_cast<size_t>(num_files));
  std::atomic<int32_t> next{0};
  auto work = [&](size_t t) {
    for (int32_t f = next++; f < num_files; f = next++) {
      errors[static_cast<size_t>(f)] = CountFile(catalog, f, field, &counts[t]);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, static_cast<size_t>(t));
  work(0);
  for (auto& thread : pool) thread.join();
  for (const auto& st : errors) {
    ARROW_RETURN_NOT_OK(WithContext(st, "vocabulary of column '" + column + "'"));
  }
  for (size_t t = 1; t < counts.size(); ++t) {
    for (auto& [value, n] : counts[t]) Add(&counts[0], value, n);
    Counts().swap(counts[t]);
  }

  std::vector<std::pair<int64_t, std::string>> ranked;
  for (auto& [value, n] : counts[0]) {
    if (n >= options.min_count) ranked.emplace_back(n, value);
  }
  // Most frequent first; ties by value, bytewise (std::string compares as
  // unsigned chars): one order on every run.
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (options.max_size && static_cast<size_t>(*options.max_size) < ranked.size()) {
    ranked.resize(static_cast<size_t>(*options.max_size));
  }
  std::vector<std::string> out;
  out.reserve(ranked.size());
  for (auto& entry : ranked) out.push_back(std::move(entry.second));
  return out;
}

}  // namespace shardfeed
