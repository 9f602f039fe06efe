#include "exec/decode.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <arrow/array.h>
#include <arrow/array/concatenate.h>
#include <arrow/buffer.h>
#include <arrow/datum.h>
#include <arrow/scalar.h>
#include <arrow/table.h>
#include <arrow/util/bit_util.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "catalog/convert.h"
#include "catalog/file_check.h"
#include "exec/assemble.h"
#include "exec/footprint.h"
#include "exec/stack_matrix.h"
#include "exec/take_rows.h"
#include "exec/tier_entry.h"
#include "exec/tile_read.h"
#include "shardfeed/status.h"
#include "storage/open.h"
#include "tier/decoded_tier_internal.h"
#include "transform/transform.h"
#include "util/deadline_file.h"
#include "util/hash.h"
#include "util/memory.h"
#include "util/parquet_error.h"
#include "util/read_properties.h"
#include "util/string_array.h"
#include "util/struct_fields.h"

namespace shardfeed {

namespace {

// Marks element i*stride..(i+1)*stride null for every null entry i of `array`.
void MarkNulls(const arrow::Array& array, int64_t stride, int64_t count, DecodedColumn* out) {
  if (array.null_count() == 0) return;
  if (out->nulls.empty()) out->nulls.assign(static_cast<size_t>(count), 0);
  for (int64_t i = 0; i < array.length(); ++i) {
    if (array.IsNull(i)) {
      for (int64_t j = 0; j < stride; ++j) out->nulls[static_cast<size_t>(i * stride + j)] = 1;
    }
  }
}

// StringHash64 of every element of a string-like or dictionary<string> array
// (0 for nulls); a dictionary's values are hashed once, then mapped.
arrow::Status HashStrings(const arrow::Array& array, uint64_t* hashes) {
  if (IsStringDictionary(array)) {
    const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
    const auto& values = *dict.dictionary();
    std::vector<uint64_t> mapped(static_cast<size_t>(values.length()), 0);
    for (int64_t k = 0; k < values.length(); ++k) {
      if (values.IsValid(k)) mapped[static_cast<size_t>(k)] = StringHash64(StringAt(values, k));
    }
    bool bad = false;
    ForEachDictionaryIndex(dict, [&](int64_t i, int64_t k) {
      if (dict.IsNull(i)) {
        hashes[i] = 0;
      } else if (k < 0 || k >= values.length()) {
        bad = true;
      } else {
        hashes[i] = mapped[static_cast<size_t>(k)];
      }
    });
    if (bad) return Error(ErrorKind::kInvalidData, "dictionary index out of range");
    return arrow::Status::OK();
  }
  if (!IsStringLike(array.type_id())) {
    return Error(ErrorKind::kUnsupportedType, "expected strings, got " + array.type()->ToString());
  }
  for (int64_t i = 0; i < array.length(); ++i) {
    hashes[i] = array.IsNull(i) ? 0 : StringHash64(StringAt(array, i));
  }
  return arrow::Status::OK();
}

// Flat values of a primitive, bool or string array; copies only for bools and
// strings (hashed, FNV-1a 64 of the bytes, for HashBucket).
arrow::Status Flatten(const std::shared_ptr<arrow::Array>& array, DType dtype, bool from_strings,
                      DecodedColumn* out) {
  const int64_t n = array->length();
  out->dtype = dtype;
  out->count = n;
  out->from_strings = from_strings;
  if (from_strings) {
    ARROW_ASSIGN_OR_RAISE(out->owned,
                          arrow::AllocateBuffer(std::max<int64_t>(n * 8, 1), EnginePool()));
    ARROW_RETURN_NOT_OK(
        HashStrings(*array, reinterpret_cast<uint64_t*>(out->owned->mutable_data())));
  } else if (dtype == DType::kBool) {
    ARROW_ASSIGN_OR_RAISE(out->owned, arrow::AllocateBuffer(std::max<int64_t>(n, 1), EnginePool()));
    auto* dst = out->owned->mutable_data();
    const auto& bools = static_cast<const arrow::BooleanArray&>(*array);
    for (int64_t i = 0; i < n; ++i) dst[i] = bools.Value(i) ? 1 : 0;
  }
  out->values = out->owned ? out->owned->data()
                           : array->data()->GetValues<uint8_t>(
                                 1, array->offset() * static_cast<int64_t>(DTypeSize(dtype)));
  MarkNulls(*array, 1, n, out);
  out->array = array;
  return arrow::Status::OK();
}

arrow::Status Normalize(const std::shared_ptr<arrow::Array>& array, DType dtype, bool from_strings,
                        DecodedColumn* out) {
  switch (array->type_id()) {
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListArray&>(*array);
      const int64_t size = list.list_type()->list_size();
      auto child = list.values()->Slice(list.value_offset(0), list.length() * size);
      ARROW_RETURN_NOT_OK(Flatten(child, dtype, from_strings, out));
      MarkNulls(list, size, out->count, out);  // a null list: all its elements null
      out->list_size = size;
      // Strings keep their elements' array, which a Vocabulary looks up; their
      // hashes are a copy, so the list's own buffers are not needed.
      if (!from_strings) out->array = array;
      return arrow::Status::OK();
    }
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      const bool large = array->type_id() == arrow::Type::LARGE_LIST;
      auto offset_of = [&](int64_t i) -> int64_t {
        return large ? static_cast<const arrow::LargeListArray&>(*array).value_offset(i)
                     : static_cast<const arrow::ListArray&>(*array).value_offset(i);
      };
      const auto& values = large ? static_cast<const arrow::LargeListArray&>(*array).values()
                                 : static_cast<const arrow::ListArray&>(*array).values();
      const int64_t n = array->length(), base = offset_of(0);
      out->list_starts.resize(static_cast<size_t>(n));
      out->list_lengths.resize(static_cast<size_t>(n));
      bool null_lists = false;
      for (int64_t i = 0; i < n; ++i) {
        out->list_starts[static_cast<size_t>(i)] = offset_of(i) - base;
        out->list_lengths[static_cast<size_t>(i)] = offset_of(i + 1) - offset_of(i);
        null_lists |= array->IsNull(i);
      }
      ARROW_RETURN_NOT_OK(
          Flatten(values->Slice(base, offset_of(n) - base), dtype, from_strings, out));
      if (null_lists) out->null_rows = array;  // decided by the null policy
      if (!from_strings) out->array = array;   // (strings: as above)
      return arrow::Status::OK();
    }
    default:
      return Flatten(array, dtype, from_strings, out);
  }
}

// The null policy, after the transforms: fill with `fill_null`, or fail naming
// the first null row.
arrow::Status ApplyNullPolicy(const std::optional<double>& fill_null, const std::string& context,
                              DecodedColumn* c) {
  if (c->null_rows) {
    if (!fill_null) {
      int64_t row = 0;
      while (!c->null_rows->IsNull(row)) ++row;
      return Error(ErrorKind::kInvalidData, context + ": null list at row " + std::to_string(row) +
                                                " (pass fill_null=<value> to replace nulls)");
    }
    // A null variable-length list becomes an empty one.
    for (int64_t i = 0; i < c->null_rows->length(); ++i) {
      if (c->null_rows->IsNull(i)) c->list_lengths[static_cast<size_t>(i)] = 0;
    }
    c->null_rows.reset();
  }
  if (!c->has_nulls()) return arrow::Status::OK();
  if (!fill_null) {
    const auto first = std::find(c->nulls.begin(), c->nulls.end(), 1) - c->nulls.begin();
    int64_t row = first;
    if (c->list_size > 0) {
      row = first / c->list_size;
    } else if (!c->list_starts.empty()) {
      row = std::upper_bound(c->list_starts.begin(), c->list_starts.end(), first) -
            c->list_starts.begin() - 1;
    }
    return Error(ErrorKind::kInvalidData, context + ": null value at row " + std::to_string(row) +
                                              " (pass fill_null=<value> to replace nulls)");
  }
  return FillNullValues(c, *fill_null);
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// Whether the engine asked to stop (a wait on remote storage ends early).
StopCheck StopOf(const DecodeHooks& hooks) {
  return [stop = hooks.stop] { return stop && stop->load(); };
}

void Slow(const DecodeHooks& hooks, const char* stage) {
  if (hooks.slow_us > 0 && hooks.slow_stage == stage) {
    // In slices, so that stopping the engine does not wait out a long sleep.
    const auto until = Clock::now() + std::chrono::microseconds(hooks.slow_us);
    while (Clock::now() < until && !(hooks.stop && hooks.stop->load())) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(10)));
    }
  }
}

// Dataset column `field` of one row group as its read type: the file's own
// column `read` converted (types promoted across files, dictionaries
// decoded), else a partition value repeated (also for a file column that
// shadows a partition key, in the files that lack it), else nulls.
arrow::Result<std::shared_ptr<arrow::Array>> DatasetColumn(
    const Catalog& catalog, const FileEntry& file, int field,
    const std::shared_ptr<arrow::Array>& read, int64_t num_rows, const std::string& context) {
  const auto& dataset_field = catalog.schema()->field(field);
  const auto read_type = ReadType(dataset_field->type());
  if (read) {
    auto conformed = ConformArray(read, read_type);
    if (!conformed.ok()) {
      return WithContext(conformed.status(),
                         context + " (" + read->type()->ToString() + " in this file, " +
                             dataset_field->type()->ToString() + " in the dataset)");
    }
    return conformed;
  }
  std::shared_ptr<arrow::Scalar> value;
  const auto& keys = catalog.partition_schema();
  const int key = keys ? keys->GetFieldIndex(dataset_field->name()) : -1;
  if (key >= 0 && static_cast<size_t>(key) < file.partition_values.size()) {
    value = file.partition_values[static_cast<size_t>(key)];
  }
  auto constant = ConstantArray(value, read_type, num_rows);
  if (!constant.ok()) {
    return WithContext(constant.status(), context + " (not in this file: its folder's value '" +
                                              (value ? value->ToString() : "null") + "' as " +
                                              dataset_field->type()->ToString() + ")");
  }
  return constant;
}

// A row group's file opened for reading: the Arrow reader over it, how its
// reads went, and the time spent waiting on them.
struct RowGroupReader {
  std::unique_ptr<parquet::arrow::FileReader> reader;
  // The file's fields, structs flattened as the catalog flattened them (what
  // field_map indexes); into the reader's manifest, made once per open.
  std::vector<FlatField> fields;
  std::shared_ptr<ReadFailure> failure;
  std::shared_ptr<std::atomic<int64_t>> io_ns;

  arrow::Status Failed(const arrow::Status& status, const ErrorContext& at) const {
    return failure->Classify(status, at);
  }
};

// Opens the file of row group `rg_index` (checked unchanged, under the remote
// deadline) and makes the Arrow reader that decodes it.
arrow::Result<RowGroupReader> OpenRowGroup(const Catalog& catalog, int32_t rg_index,
                                           const DecodeHooks& hooks, const std::string& context) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  const auto t_open = Clock::now();
  const ErrorContext where{file.rel_path, rg.row_group, "", ""};
  if (!hooks.open) {
    // (Through the file cache, the cache checks the version instead.)
    ARROW_RETURN_NOT_OK(WithContext(
        CheckUnchanged(*catalog.filesystem(), file, hooks.remote_timeout, StopOf(hooks)), context));
  }
  auto opened = OpenCatalogFile(catalog, rg.file, hooks.open, hooks.remote_timeout);
  if (!opened.ok()) return ParquetStatus(opened.status(), where);
  // The footer of this row group alone: it is row group 0 of the reader.
  auto footer = RowGroupFooter(rg);
  if (!footer.ok()) return WithContext(footer.status(), context);
  // Uncached remote reads: one deadline for all of this row group's reads.
  if (!hooks.open && !catalog.is_local()) {
    opened->file = WithDeadline(opened->file, hooks.remote_timeout, hooks.stop);
  }
  hooks.clock->Add(hooks.io_stage, t_open, 0, 0, rg_index);
  RowGroupReader out;
  out.failure = opened->failure;
  out.io_ns = std::make_shared<std::atomic<int64_t>>(0);
  const bool slow_io = hooks.slow_stage == StageName(hooks.io_stage);
  auto input = TimedFile(opened->file, hooks.clock, hooks.io_stage, rg_index,
                         slow_io ? hooks.slow_us : 0, out.io_ns, hooks.stop);
  try {
    parquet::ReaderProperties reader_props(EnginePool());
    // When asked, pages written with a CRC32 (pyarrow's write_page_checksum,
    // Spark) are checked: a flipped bit is an error, never a changed value.
    // Pages without one are read as before.
    reader_props.set_page_checksum_verification(hooks.verify_page_checksums);
    const bool pre_buffer = PreBuffered(rg.total_bytes);
    if (!pre_buffer) {
      // Page by page through a small buffer per column (footprint.h).
      reader_props.enable_buffered_stream();
      reader_props.set_buffer_size(kStreamBufferBytes);
    }
    auto pq = parquet::ParquetFileReader::Open(input, reader_props, *footer);
    parquet::ArrowReaderProperties props = ArrowReadDefaults();
    props.set_use_threads(false);  // the engine parallelizes across row groups
    // One chunk per column: with the default (64Ki rows) a larger row group came
    // back in pieces that then had to be concatenated, copying everything again.
    // But Arrow reserves the whole batch up front, and the footer's row count
    // is only checked against the pages by reading them: for a count beyond
    // kOneChunkRowsPerByte rows per byte of the row group (more than real data
    // compresses to; a footer's lie or runs of constants) the row group is read
    // in 64Ki-row pieces, so memory follows the rows that are really there.
    constexpr int64_t kOneChunkRowsPerByte = 256;
    const bool plausible = rg.num_rows / kOneChunkRowsPerByte <= rg.total_bytes;
    props.set_batch_size(plausible ? std::max<int64_t>(rg.num_rows, 1) : int64_t{1} << 16);
    // Coalesced, read-ahead column chunks: fewer, larger reads (also locally,
    // where it measured 8-15% less read+decode time than chunk-by-chunk reads).
    // Not for a large row group: it would be held compressed and decoded at
    // once (the memory budget's DecodeReservation counts on this).
    props.set_pre_buffer(pre_buffer);
    // The coalesced reads land in the engine's pool too, whose freed pages
    // stay for the next row group's reads (Arrow's default pool gave them
    // back: tens of MB of fresh pages per row group).
    props.set_io_context(arrow::io::IOContext(EnginePool()));
    auto maybe_reader = parquet::arrow::FileReader::Make(EnginePool(), std::move(pq), props);
    if (!maybe_reader.ok()) return out.Failed(maybe_reader.status(), where);
    out.reader = std::move(*maybe_reader);
    out.fields = FlattenStructs(out.reader->manifest());
  } catch (...) {
    return out.Failed(ParquetExceptionStatus(std::current_exception(), {}, IoOutcome::kReadOk),
                      where);
  }
  return out;
}

// A field of a list of structs's elements that this file lacks (`ls.b`, added
// to the elements since) is a list of nulls as long as the row's list, not a
// null list: the index in `flat` of a field of the same list the file has
// (`ls.a`), whose lists give the lengths; -1 where there is none.
int ListSibling(const std::vector<FlatField>& flat, const arrow::Field& dataset_field,
                const ColumnOrigin& origin) {
  // A column of its own named 'ls.b' is no field of ls's structs.
  if (origin.partition_key >= 0 || origin.struct_origin.empty()) return -1;
  const auto want = ReadType(dataset_field.type())->id();
  if (want != arrow::Type::LIST && want != arrow::Type::LARGE_LIST) return -1;
  const std::string& name = dataset_field.name();
  for (size_t k = 0; k < flat.size(); ++k) {
    const auto& f = flat[k];
    const auto id = f.field->type()->id();
    if (f.list_at < 0 || (id != arrow::Type::LIST && id != arrow::Type::LARGE_LIST)) continue;
    // The list's own name: the field's, less its path inside the elements.
    size_t inside = 0;
    for (size_t p = static_cast<size_t>(f.list_at); p < f.path.size(); ++p) {
      inside += f.path[p].size() + 1;
    }
    const std::string& have = f.field->name();
    if (inside >= have.size()) continue;
    const std::string_view list(have.data(), have.size() - inside);
    if (name.size() > list.size() + 1 && name.starts_with(list) && name[list.size()] == '.') {
      return static_cast<int>(k);
    }
  }
  return -1;
}

// `sibling`'s lists with every element null, of the dataset field's type.
arrow::Result<std::shared_ptr<arrow::Array>> NullsInLists(const arrow::Array& sibling,
                                                          const arrow::Field& dataset_field) {
  const auto read_type = ReadType(dataset_field.type());
  const auto& element = static_cast<const arrow::BaseListType&>(*read_type).value_field();
  auto data = sibling.data()->Copy();
  data->type =
      sibling.type_id() == arrow::Type::LIST ? arrow::list(element) : arrow::large_list(element);
  ARROW_ASSIGN_OR_RAISE(
      auto values,
      arrow::MakeArrayOfNull(element->type(), data->child_data[0]->length, EnginePool()));
  data->child_data[0] = values->data();  // the offsets and list nulls stay the sibling's
  return ConformArray(arrow::MakeArray(data), read_type);
}

// Reads the file's own columns of the layout (table_column[i]: field i's column
// in the table, -1 when the file lacks it or it is a partition column; for a
// field of a list of structs's elements it lacks, sibling_column[i]: the
// column of another field of that list, else -1), checks
// the row count and keeps only the `selection` rows when a filter gave one.
arrow::Result<std::shared_ptr<arrow::Table>> ReadTable(
    const Catalog& catalog, int32_t rg_index, const Layout& layout, const DecodeHooks& hooks,
    const std::string& context, const std::vector<int64_t>* selection, const RowGroupReader& opened,
    const std::vector<bool>& wanted, std::vector<int>* table_column,
    std::vector<int>* sibling_column) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  const ErrorContext where{file.rel_path, rg.row_group, "", ""};
  // Dataset columns map onto the file's own by name (field_map), structs
  // flattened as the catalog flattened them.
  const auto& flat = opened.fields;
  std::vector<const FlatField*> fields(layout.fields.size(), nullptr);
  table_column->assign(layout.fields.size(), -1);
  sibling_column->assign(layout.fields.size(), -1);
  std::vector<const FlatField*> all_fields;
  std::unordered_map<const FlatField*, int> column_of;  // each field read once
  auto column = [&](const FlatField* f) {
    const auto [it, added] = column_of.emplace(f, static_cast<int>(all_fields.size()));
    if (added) all_fields.push_back(f);
    return it->second;
  };
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    const int field = layout.fields[i];
    const int in_file = file.field_map.empty() ? field : file.field_map[static_cast<size_t>(field)];
    if (!wanted[i]) continue;
    if (in_file < 0) {
      const int sibling = ListSibling(flat, *catalog.schema()->field(field),
                                      catalog.column_origins()[static_cast<size_t>(field)]);
      if (sibling >= 0) (*sibling_column)[i] = column(&flat[static_cast<size_t>(sibling)]);
      continue;
    }
    if (static_cast<size_t>(in_file) >= flat.size()) {
      return Error(ErrorKind::kInvalidData,
                   context + ": the file has fewer columns than its footer said");
    }
    fields[i] = &flat[static_cast<size_t>(in_file)];
    (*table_column)[i] = column(fields[i]);
  }
  if (all_fields.empty()) return nullptr;

  auto read = [&](const std::vector<const FlatField*>& some)
      -> arrow::Result<std::shared_ptr<arrow::Table>> {
    BEGIN_PARQUET_CATCH
    return ReadFlatFields(*opened.reader, 0, some);  // the footer's only row group
    END_PARQUET_CATCH(ErrorContext{}, IoOutcome::kReadOk)
  };
  auto maybe_table = read(all_fields);
  if (!maybe_table.ok()) {
    // A file rewritten during the read fails in whatever way its new bytes
    // make Arrow fail ("file too short", a bad page): say what happened.
    if (!hooks.open) {
      ARROW_RETURN_NOT_OK(WithContext(
          CheckUnchanged(*catalog.filesystem(), file, hooks.remote_timeout, StopOf(hooks)),
          context));
    }
    // Single out the column that fails, so the message can name it.
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      if (!fields[i]) continue;
      auto single = read({fields[i]});
      if (!single.ok())
        return opened.Failed(single.status(), where.WithColumn(layout.field_names[i]));
    }
    return opened.Failed(maybe_table.status(), where);
  }
  std::shared_ptr<arrow::Table> table = *maybe_table;
  // (Whether the file was rewritten while it was read: once, after all the
  // row group's reads, in DecodeRowGroup.)
  if (table->num_rows() != rg.num_rows) {
    return Error(ErrorKind::kInvalidData,
                 context + ": decoded " + std::to_string(table->num_rows()) +
                     " rows, the footer says " + std::to_string(rg.num_rows));
  }
  if (selection) {
    // Only the rows that pass the filter go on to transforms and batches.
    auto taken = TakeRows(std::move(table), *selection);
    if (!taken.ok()) return WithContext(taken.status(), context + ": applying the filter");
    table = std::move(*taken);
  }
  return table;
}

// Reads the `wanted` fields' columns of the row group from the opened file and
// flattens them into (*columns)[i] (the others are left as they are); a
// column the file lacks, or a partition column, is made here instead of read.
// `first`: the row group's first read (its bytes and rows go to the stats).
arrow::Status ReadColumns(const Catalog& catalog, int32_t rg_index, const Layout& layout,
                          const DecodeHooks& hooks, const std::string& context,
                          const std::vector<int64_t>* selection, const RowGroupReader& opened,
                          const std::vector<bool>& wanted, bool first,
                          std::vector<DecodedColumn>* columns) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  const auto t_decode = Clock::now();
  const int64_t io_before = opened.io_ns->load();
  std::vector<int> table_column, sibling_column;
  ARROW_ASSIGN_OR_RAISE(auto table, ReadTable(catalog, rg_index, layout, hooks, context, selection,
                                              opened, wanted, &table_column, &sibling_column));
  const int64_t num_rows = selection ? static_cast<int64_t>(selection->size()) : rg.num_rows;

  columns->resize(layout.fields.size());
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (!wanted[i]) continue;
    const std::string column_context = context + ", column '" + layout.field_names[i] + "'";
    std::shared_ptr<arrow::Array> stored;  // the file's own column, when it has one
    const int at = table_column[i] >= 0 ? table_column[i] : sibling_column[i];
    if (at >= 0) {
      const auto& chunked = table->column(at);
      if (chunked->num_chunks() == 1) {
        stored = chunked->chunk(0);
      } else {
        auto maybe = arrow::Concatenate(chunked->chunks(), EnginePool());
        if (!maybe.ok()) return WithContext(maybe.status(), column_context);
        stored = *maybe;
      }
    }
    if (table_column[i] < 0 && stored) {
      auto nulls = NullsInLists(*stored, *catalog.schema()->field(layout.fields[i]));
      if (!nulls.ok()) return WithContext(nulls.status(), column_context);
      stored = *nulls;
    }
    ARROW_ASSIGN_OR_RAISE(auto array, DatasetColumn(catalog, file, layout.fields[i], stored,
                                                    num_rows, column_context));
    auto& column = (*columns)[i];
    ARROW_RETURN_NOT_OK(WithContext(
        Normalize(array, layout.field_raw_dtypes[i], layout.field_from_strings[i], &column),
        column_context));
  }
  const auto t_end = Clock::now();
  // Reads run on Arrow's I/O threads while this one waits: decode is the rest.
  const int64_t io = opened.io_ns->load() - io_before;
  const int64_t busy = std::max<int64_t>(0, (t_end - t_decode).count() - io);
  hooks.clock->AddSpan(Stage::kDecode, t_decode, t_end, busy, first ? rg.total_bytes : 0,
                       first ? rg.num_rows : 0, rg_index);
  return arrow::Status::OK();
}

// Members [first, last) of the fused stack `plan` (their leaves: `leaves`)
// read by the tile read into `matrix`: false when one holds a null (the
// caller then reads them the generic way).
arrow::Result<bool> ReadTiled(const Catalog& catalog, int32_t rg_index, const Layout& layout,
                              const OutputPlan& plan, size_t first, size_t last,
                              std::span<const int> leaves, const DecodeHooks& hooks,
                              const std::string& context, const RowGroupReader& opened,
                              const std::vector<int64_t>* selection, DecodedColumn* matrix) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  auto* reader = opened.reader->parquet_reader();
  const auto t_decode = Clock::now();
  const int64_t io_before = opened.io_ns->load();
  size_t failed = 0;
  auto outcome =
      ReadMembersTiled(*reader, layout, plan, first, last, leaves.subspan(first, last - first),
                       rg.num_rows, selection, matrix->owned->mutable_data(), &failed);
  if (!outcome.ok()) {
    // As in ReadTable: a file rewritten during the read says so.
    if (!hooks.open) {
      ARROW_RETURN_NOT_OK(WithContext(
          CheckUnchanged(*catalog.filesystem(), file, hooks.remote_timeout, StopOf(hooks)),
          context));
    }
    const ErrorContext where{file.rel_path, rg.row_group, "", ""};
    const auto f = static_cast<size_t>(plan.sources[first + std::min(failed, last - first - 1)]);
    return opened.Failed(outcome.status(), where.WithColumn(layout.field_names[f]));
  }
  const auto t_end = Clock::now();
  const int64_t io = opened.io_ns->load() - io_before;
  hooks.clock->AddSpan(Stage::kDecode, t_decode, t_end,
                       std::max<int64_t>(0, (t_end - t_decode).count() - io), 0, 0, rg_index);
  return *outcome == TileOutcome::kDone;
}

arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroupBody(const Catalog& catalog,
                                                                         int32_t rg_index,
                                                                         const Layout& layout,
                                                                         const RandomKey& key,
                                                                         const DecodeHooks& hooks) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  const std::string context =
      "file '" + file.rel_path + "', row group " + std::to_string(rg.row_group);
  auto decoded = std::make_shared<DecodedRowGroup>();
  decoded->index = rg_index;
  decoded->first_row = rg.first_row;
  decoded->num_rows = rg.num_rows;
  const bool filtered = hooks.filter && !hooks.filter->All(rg_index);
  if (filtered) {
    decoded->rows = std::make_shared<const std::vector<int64_t>>(hooks.filter->Rows(rg_index));
    decoded->num_rows = static_cast<int64_t>(decoded->rows->size());
  }
  const int64_t num_rows = decoded->num_rows;
  decoded->bytes = rg.total_bytes;

  // The deterministic part: from the decoded tier when it has the entry, else
  // read, decode and transform here (and store it there).
  std::vector<size_t> done(layout.fields.size(), 0);           // transforms applied per column
  std::vector<DecodedColumn> matrices(layout.outputs.size());  // stacks' matrices made so far
  const TierEntryPlan entry = hooks.tier ? PlanTierEntry(layout) : TierEntryPlan{};
  std::string tier_key;
  storage_internal::LockedFd entry_lock;  // held from the load until a miss is stored
  bool cached = false;
  if (hooks.tier) {
    const auto t_load = Clock::now();
    tier_key = DecodedTier::Impl::Key(catalog, rg_index, layout) + entry.key_suffix;
    // A filtered row group holds other rows than the whole one.
    if (filtered) tier_key += "|filter:" + hooks.filter->key();
    // (Deleted rows follow the table's log, not the file: part of the key too.)
    if (filtered && file.deleted) tier_key += "|deleted:" + file.deleted->id;
    // Whoever else on the node decodes this row group now, it is waited for
    // and then mapped: each row group is decoded once.
    ARROW_ASSIGN_OR_RAISE(entry_lock,
                          hooks.tier->impl()->LockEntry(tier_key, StopOf(hooks), hooks.help));
    const uint64_t mark = hooks.tier->impl()->changes_->Mark();
    auto maybe_loaded = hooks.tier->impl()->Load(tier_key);
    if (!maybe_loaded.ok()) {
      return WithContext(maybe_loaded.status(), context + ", decoded cache entry");
    }
    auto& loaded = *maybe_loaded;
    if (loaded &&
        TakeEntryRecords(&*loaded, layout, entry, num_rows, &decoded->columns, &matrices)) {
      MarkMapped(hooks.tier->impl()->PathOf(tier_key), mark, decoded->columns, matrices,
                 decoded.get());
      // The entry is keyed by the file as the catalog saw it: a local file
      // replaced since (a new version renamed over it between epochs) is an
      // error, as an uncached read would make it, not its old rows.  (A stat;
      // remote files are checked when fetched, and a cached copy stays one
      // version.)
      if (catalog.is_local()) {
        ARROW_RETURN_NOT_OK(WithContext(CheckUnchanged(*catalog.filesystem(), file), context));
      }
      cached = true;
      entry_lock = storage_internal::LockedFd{};
      for (size_t i = 0; i < layout.fields.size(); ++i) done[i] = DeterministicPrefix(layout, i);
      hooks.clock->Add(Stage::kRead, t_load, 0, num_rows, rg_index);
    }
  }
  std::optional<RowGroupReader> opened;
  if (!cached) {
    ARROW_ASSIGN_OR_RAISE(opened, OpenRowGroup(catalog, rg_index, hooks, context));
  }
  // Stacks whose columns are read a few at a time (kFusedColumns members),
  // straight into the matrix: by the tile read where every member of the
  // group qualifies (tile_read.h); the other groups the generic way, through
  // Arrow's arrays.  In a row group too large to pre-buffer those are read a
  // group at a time too, so that it is held once (matrix), not twice (arrays
  // and matrix); in a pre-buffered one they come with the other columns, and
  // the tiled groups in one more coalesced read.
  const bool pre_buffered = PreBuffered(rg.total_bytes);
  std::vector<bool> fused = cached ? std::vector<bool>() : FusedStacks(layout);
  std::vector<std::vector<int>> tile_leaves(fused.size());
  std::vector<bool> read_whole(layout.fields.size(), true);
  std::vector<int> prefetch;
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& plan = layout.outputs[o];
    tile_leaves[o] = TileLeaves(layout, plan, file, opened->fields,
                                *opened->reader->parquet_reader()->metadata());
    bool any_tiled = false;
    for (size_t first = 0; first < plan.sources.size(); first += kFusedColumns) {
      const size_t last = std::min(plan.sources.size(), first + kFusedColumns);
      const bool tiled = GroupTiled(tile_leaves[o], first, last);
      any_tiled = any_tiled || tiled;
      for (size_t c = first; c < last; ++c) {
        read_whole[static_cast<size_t>(plan.sources[c])] = pre_buffered && !tiled;
        if (pre_buffered && tiled) prefetch.push_back(tile_leaves[o][c]);
      }
    }
    if (pre_buffered && !any_tiled) fused[o] = false;  // made from its arrays, as before
  }
  if (!cached) {
    for (size_t o = 0; o < layout.outputs.size(); ++o) {
      const auto& plan = layout.outputs[o];
      if (plan.kind != OutputKind::kStack || (o < fused.size() && fused[o])) continue;
      hooks.clock->CountStackColumns(0, static_cast<int64_t>(plan.sources.size()));
    }
  }
  if (!cached) {
    Slow(hooks, "decode");
    ARROW_RETURN_NOT_OK(ReadColumns(catalog, rg_index, layout, hooks, context, decoded->rows.get(),
                                    *opened, read_whole, true, &decoded->columns));
  }
  if (!prefetch.empty()) {
    try {
      const parquet::ArrowReaderProperties defaults;
      opened->reader->parquet_reader()->PreBuffer({0}, prefetch, arrow::io::IOContext(EnginePool()),
                                                  defaults.cache_options());
    } catch (...) {
      const ErrorContext where{file.rel_path, rg.row_group, "", ""};
      return opened->Failed(
          ParquetExceptionStatus(std::current_exception(), {}, IoOutcome::kReadOk), where);
    }
  }
  const auto t_transform = Clock::now();
  // Other stages' time inside the transform span (reads and decodes of fused
  // stacks, matrices made), which the span's busy time leaves out.
  int64_t nested_ns = 0;
  auto since = [](Clock::time_point t0) { return (Clock::now() - t0).count(); };
  Slow(hooks, "transform");
  auto apply = [&](size_t i, size_t until) -> arrow::Status {
    const auto& chain = layout.field_transforms[i];
    for (; done[i] < until; ++done[i]) {
      const size_t t = chain[done[i]];
      ARROW_RETURN_NOT_OK(
          WithContext(ApplyTransform(layout.transforms[t], t, key, rg.first_row, num_rows,
                                     &decoded->columns[i], decoded->rows.get()),
                      context + ", column '" + layout.field_names[i] + "', " +
                          TransformOpName(layout.transforms[t].op)));
    }
    return arrow::Status::OK();
  };
  auto nulls = [&](size_t i) -> arrow::Status {
    if (layout.field_nulls_to_stack[i]) return arrow::Status::OK();  // the stack's FillNull
    // A column this file lacks reads as nulls (schema evolution): say so, or the
    // message would blame a null no one wrote.
    const auto field = static_cast<size_t>(layout.fields[i]);
    const bool absent = !file.field_map.empty() && file.field_map[field] < 0 &&
                        catalog.column_origins()[field].partition_key < 0;
    return ApplyNullPolicy(layout.field_fill_null[i],
                           context + ", column '" + layout.field_names[i] + "'" +
                               (absent ? " (not in this file: it reads as nulls there)" : ""),
                           &decoded->columns[i]);
  };
  auto make_matrix = [&](size_t o) -> arrow::Status {
    const auto t_stack = Clock::now();
    auto matrix = MakeStackMatrix(layout, layout.outputs[o], decoded->columns, num_rows,
                                  hooks.matrices.get());
    if (!matrix.ok()) {
      return WithContext(matrix.status(), context + ", stack '" + layout.outputs[o].name + "'");
    }
    hooks.clock->Add(Stage::kAssemble, t_stack, matrix->owned->size(), 0, rg_index);
    nested_ns += since(t_stack);
    matrices[o] = std::move(*matrix);
    return arrow::Status::OK();
  };
  // A fused stack: kFusedColumns members at a time are read, transformed,
  // null-filled and written into the matrix, then dropped, so that a large
  // row group is held once (its matrix), not twice (its arrays and matrix).
  //
  // The tile reads come first, as parts that the workers waiting for this row
  // group may take (shared_work.h); their outcomes are then taken group by
  // group in order, so the error reported is the one a read in order meets.
  struct TilePart {
    size_t o, first, last;
    arrow::Status status;
    bool tiled = false;
  };
  std::vector<TilePart> parts;
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& plan = layout.outputs[o];
    ARROW_ASSIGN_OR_RAISE(matrices[o], NewStackMatrix(plan, num_rows, hooks.matrices.get()));
    for (size_t first = 0; first < plan.sources.size(); first += kFusedColumns) {
      const size_t last = std::min(plan.sources.size(), first + kFusedColumns);
      if (GroupTiled(tile_leaves[o], first, last)) parts.push_back({o, first, last, {}, false});
    }
  }
  if (!parts.empty()) {
    const auto t_tiles = Clock::now();
    auto run = [&](size_t k) -> arrow::Status {
      TilePart& part = parts[k];  // (each part's own fields: no two threads share one)
      Slow(hooks, "tile");
      try {
        auto tiled = ReadTiled(catalog, rg_index, layout, layout.outputs[part.o], part.first,
                               part.last, tile_leaves[part.o], hooks, context, *opened,
                               decoded->rows.get(), &matrices[part.o]);
        if (tiled.ok()) {
          part.tiled = *tiled;
        } else {
          part.status = tiled.status();
        }
      } catch (const std::bad_alloc&) {
        part.status = arrow::Status::OutOfMemory(context + ": out of memory");
      } catch (const std::exception& e) {
        part.status = Error(ErrorKind::kInvalidData, context + ": " + e.what());
      }
      return arrow::Status::OK();
    };
    if (parts.size() > 1 && hooks.share) {
      auto work = std::make_shared<SharedWork>(parts.size(), run);
      hooks.share(work);
      ARROW_RETURN_NOT_OK(work->Finish());
    } else {
      for (size_t k = 0; k < parts.size(); ++k) ARROW_RETURN_NOT_OK(run(k));
    }
    nested_ns += since(t_tiles);
  }
  size_t next_part = 0;
  for (size_t o = 0; o < fused.size(); ++o) {
    if (!fused[o]) continue;
    const auto& plan = layout.outputs[o];
    const size_t n = plan.sources.size();
    for (size_t first = 0; first < n; first += kFusedColumns) {
      const size_t last = std::min(n, first + kFusedColumns);
      const auto t_read = Clock::now();
      if (next_part < parts.size() && parts[next_part].o == o && parts[next_part].first == first) {
        const TilePart& part = parts[next_part++];
        ARROW_RETURN_NOT_OK(part.status);
        if (part.tiled) {
          hooks.clock->CountStackColumns(static_cast<int64_t>(last - first), 0);
          continue;
        }
      }
      // (Read already with the other columns, unless the tile read met a null
      // without a fill or the row group is read a group at a time.)
      std::vector<bool> wanted(layout.fields.size(), false);
      bool unread = false;
      for (size_t c = first; c < last; ++c) {
        const auto f = static_cast<size_t>(plan.sources[c]);
        wanted[f] = true;
        unread = unread || !read_whole[f];
      }
      if (unread) {
        ARROW_RETURN_NOT_OK(ReadColumns(catalog, rg_index, layout, hooks, context,
                                        decoded->rows.get(), *opened, wanted, false,
                                        &decoded->columns));
      }
      nested_ns += since(t_read);
      hooks.clock->CountStackColumns(0, static_cast<int64_t>(last - first));
      for (size_t c = first; c < last; ++c) {
        const auto f = static_cast<size_t>(plan.sources[c]);
        ARROW_RETURN_NOT_OK(apply(f, layout.field_transforms[f].size()));
        ARROW_RETURN_NOT_OK(nulls(f));
      }
      const auto t_fill = Clock::now();
      ARROW_RETURN_NOT_OK(WithContext(
          FillStackMembers(layout, plan, decoded->columns, num_rows, first, last, &matrices[o]),
          context + ", stack '" + plan.name + "'"));
      hooks.clock->Add(
          Stage::kAssemble, t_fill,
          static_cast<int64_t>((last - first) * DTypeSize(plan.matrix_dtype)) * num_rows, 0,
          rg_index);
      nested_ns += since(t_fill);
      for (size_t c = first; c < last; ++c) {
        decoded->columns[static_cast<size_t>(plan.sources[c])] = DecodedColumn{};
      }
    }
  }
  if (opened && !hooks.open) {
    // Rewritten while it was read: the bytes may mix both versions.  Checked
    // once after all of the row group's reads (a version never comes back):
    // locally a stat; remotely a second HEAD request, since Arrow cannot make
    // the ranged GETs conditional (an object overwritten between the first
    // HEAD and the GETs gave rows of both versions).  Each tile read made one
    // of its own: 6 requests per row group of a 64-column stack, not 2.
    // Counted as I/O (a HEAD request remotely), not as the transform span it sits in.
    const auto t_check = Clock::now();
    ARROW_RETURN_NOT_OK(WithContext(
        CheckUnchanged(*catalog.filesystem(), file, hooks.remote_timeout, StopOf(hooks)), context));
    hooks.clock->Add(hooks.io_stage, t_check, 0, 0, rg_index);
    nested_ns += since(t_check);
  }
  opened.reset();  // the file is read

  if (hooks.tier && !cached) {
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      ARROW_RETURN_NOT_OK(apply(i, DeterministicPrefix(layout, i)));
    }
    // The stored matrices' members are complete (no random transform): their
    // null policy (a fill, or an error either way) and matrix come now.
    for (size_t o = 0; o < layout.outputs.size(); ++o) {
      if (!entry.matrix_stored[o] || matrices[o].owned) continue;
      if (layout.outputs[o].fill.empty()) {  // else the stack's FillNull takes the nulls
        for (int s : layout.outputs[o].sources) ARROW_RETURN_NOT_OK(nulls(static_cast<size_t>(s)));
      }
      ARROW_RETURN_NOT_OK(make_matrix(o));
    }
    std::string why_not;
    // Writing the entry (and mapping it back) is local disk I/O: the read stage's.
    const auto t_store = Clock::now();
    // A full tier first drops what this dataset's rewritten files left in it.
    const auto stored = hooks.tier->impl()->Store(
        tier_key, EntryRecords(entry, decoded->columns, matrices), num_rows, &why_not,
        [&] { hooks.tier->impl()->PruneSuperseded(catalog); });
    if (hooks.map_stored && !stored && hooks.memory_limit > 0) {
      return Error(ErrorKind::kStorage,
                   context +
                       ": shuffle=\"global\" serves every row group of the epoch from the "
                       "decoded cache, which cannot store this one (" +
                       why_not +
                       "); held in memory instead, the epoch's row groups would go past "
                       "memory_limit. Give the cache room (cache_limit_bytes, disk space), "
                       "set memory_limit=None to hold them in memory, or use shuffle=True");
    }
    entry_lock = storage_internal::LockedFd{};
    if (hooks.map_stored && stored) {
      // What was just stored, mapped: the decoded copies go (a failed store
      // or load keeps them).
      const uint64_t mark = hooks.tier->impl()->changes_->Mark();
      auto reloaded = hooks.tier->impl()->Load(tier_key, stored);
      std::vector<DecodedColumn> columns, mapped;
      if (reloaded.ok() && *reloaded &&
          TakeEntryRecords(&**reloaded, layout, entry, num_rows, &columns, &mapped)) {
        decoded->columns = std::move(columns);
        matrices = std::move(mapped);
        cached = true;
        MarkMapped(hooks.tier->impl()->PathOf(tier_key), mark, decoded->columns, matrices,
                   decoded.get());
      }
    }
    hooks.clock->Add(Stage::kRead, t_store, 0, 0, rg_index);
    nested_ns += since(t_store);
  }
  // A stack's FillNull takes its members' nulls, those of a member another
  // output reads too (under the column's own policy: its fill_null, or an
  // error) as well: such a stack is made before that policy fills them.
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    if (plan.kind != OutputKind::kStack || plan.fill.empty() || matrices[o].owned) continue;
    const bool shared = std::any_of(plan.sources.begin(), plan.sources.end(), [&](int s) {
      return !layout.field_nulls_to_stack[static_cast<size_t>(s)];
    });
    if (!shared) continue;
    for (int s : plan.sources) {
      const auto f = static_cast<size_t>(s);
      ARROW_RETURN_NOT_OK(apply(f, layout.field_transforms[f].size()));
    }
    ARROW_RETURN_NOT_OK(make_matrix(o));
  }
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (cached && !entry.column_stored[i]) continue;  // only a stored matrix reads it
    ARROW_RETURN_NOT_OK(apply(i, layout.field_transforms[i].size()));
    ARROW_RETURN_NOT_OK(nulls(i));
  }

  const auto t_transformed = Clock::now();
  hooks.clock->AddSpan(Stage::kTransform, t_transform, t_transformed,
                       std::max<int64_t>(0, (t_transformed - t_transform).count() - nested_ns), 0,
                       layout.transforms.empty() ? 0 : num_rows, rg_index);

  // Stacks become row-major matrices once per row group (or come so from the
  // tier, mapped); columns that only feed stacks are then dropped, so memory
  // stays one copy of the data.
  decoded->stacks.resize(layout.outputs.size());
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    if (plan.kind != OutputKind::kStack) continue;
    if (!matrices[o].owned) ARROW_RETURN_NOT_OK(make_matrix(o));
    if (!plan.transforms.empty()) {
      // (A mapped matrix is copied by the first transform that writes.)
      const auto t_stack_transform = Clock::now();
      ARROW_RETURN_NOT_OK(WithContext(TransformStack(layout, plan, key, rg.first_row, num_rows,
                                                     decoded->rows.get(), &matrices[o]),
                                      context + ", stack '" + plan.name + "'"));
      hooks.clock->Add(Stage::kTransform, t_stack_transform, 0, num_rows, rg_index);
    }
    decoded->stacks[o] = std::move(matrices[o].owned);
  }
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (!layout.field_used_alone[i]) decoded->columns[i] = DecodedColumn{};
  }
  // Transforms and copies above read the mapped entry.
  if (decoded->mapped_damage) SeeTierChanges(hooks.tier.get());
  ARROW_RETURN_NOT_OK(MappedIntact(*decoded, context, hooks.tier.get()));
  return std::shared_ptr<const DecodedRowGroup>(std::move(decoded));
}

}  // namespace

arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroup(const Catalog& catalog,
                                                                     int32_t rg_index,
                                                                     const Layout& layout,
                                                                     const RandomKey& key,
                                                                     const DecodeHooks& hooks) {
  auto decoded = DecodeRowGroupBody(catalog, rg_index, layout, key, hooks);
  // Bytes that make no sense (a row count, a page, a null where none may be)
  // may be a file rewritten while it was read, which the one check after the
  // reads has not reached: say that instead, as a check after each read did.
  if (!decoded.ok() && !hooks.open && KindOf(decoded.status()) == ErrorKind::kInvalidData) {
    const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
    const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
    auto unchanged =
        CheckUnchanged(*catalog.filesystem(), file, hooks.remote_timeout, StopOf(hooks));
    // (A check that could not be made, e.g. no answer from the store, leaves
    // the error as it was.)
    if (!unchanged.ok() && KindOf(unchanged) == ErrorKind::kInvalidData) {
      return WithContext(unchanged,
                         "file '" + file.rel_path + "', row group " + std::to_string(rg.row_group));
    }
  }
  return decoded;
}

}  // namespace shardfeed
