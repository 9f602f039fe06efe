#include "exec/tile_read.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type.h>
#include <parquet/column_reader.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>
#include <parquet/statistics.h>

#include "exec/assemble.h"
#include "shardfeed/status.h"
#include "util/dtype_dispatch.h"
#include "util/parquet_error.h"

namespace shardfeed {

namespace {

// Values bytes per stored byte beyond which a column is not tile-read.
constexpr int64_t kMaxExpansion = 64;

// The dtype an Arrow type id reads as without conversion, and the physical
// type it must come from.
std::optional<std::pair<DType, parquet::Type::type>> PlainNumber(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::FLOAT:
      return std::pair{DType::kFloat32, parquet::Type::FLOAT};
    case arrow::Type::DOUBLE:
      return std::pair{DType::kFloat64, parquet::Type::DOUBLE};
    case arrow::Type::INT32:
      return std::pair{DType::kInt32, parquet::Type::INT32};
    case arrow::Type::INT64:
      return std::pair{DType::kInt64, parquet::Type::INT64};
    default:
      return std::nullopt;
  }
}

// Reads `want` values of one member into `out`, nulls replaced by `fill`:
// kNulls at a null when there is no fill, an error when the column ends
// early or a page makes no progress.
template <typename ParquetType>
arrow::Result<TileOutcome> ReadTile(parquet::ColumnReader* column, int64_t want, int16_t* defs,
                                    const std::optional<double>& fill, uint8_t* out) {
  using T = typename ParquetType::c_type;
  auto* reader = static_cast<parquet::TypedColumnReader<ParquetType>*>(column);
  const int16_t defined = reader->descr()->max_definition_level();
  auto* values = reinterpret_cast<T*>(out);
  int64_t got = 0;
  while (got < want) {
    if (!reader->HasNext()) {
      return Error(ErrorKind::kInvalidData, "the column chunk ended early");
    }
    int64_t values_read = 0;
    const int64_t levels = reader->ReadBatch(want - got, defined > 0 ? defs : nullptr, nullptr,
                                             values + got, &values_read);
    if (levels <= 0) return Error(ErrorKind::kInvalidData, "a page gave no values");
    if (values_read != levels) {
      if (defined == 0 || values_read > levels ||
          std::count(defs, defs + levels, defined) != values_read) {
        return Error(ErrorKind::kInvalidData, "definition levels unlike the values");
      }
      if (!fill) return TileOutcome::kNulls;
      // The values came dense: spread them to their rows from the back (a
      // value never moves down), the nulls' rows filled as FillNullValues
      // and the stack's fill do.
      const T value = SaturatingCast<T>(*fill);
      int64_t k = values_read;
      for (int64_t i = levels - 1; i >= 0; --i) {
        values[got + i] = defs[i] == defined ? values[got + --k] : value;
      }
    }
    got += levels;
  }
  return TileOutcome::kDone;
}

arrow::Result<TileOutcome> ReadTileOf(DType dtype, parquet::ColumnReader* column, int64_t want,
                                      int16_t* defs, const std::optional<double>& fill,
                                      uint8_t* out) {
  switch (dtype) {
    case DType::kFloat32:
      return ReadTile<parquet::FloatType>(column, want, defs, fill, out);
    case DType::kFloat64:
      return ReadTile<parquet::DoubleType>(column, want, defs, fill, out);
    case DType::kInt32:
      return ReadTile<parquet::Int32Type>(column, want, defs, fill, out);
    case DType::kInt64:
      return ReadTile<parquet::Int64Type>(column, want, defs, fill, out);
    default:
      return Error(ErrorKind::kInvalidArgument, "the tile read takes no such dtype");
  }
}

// What a null of member `field` becomes: the stack's FillNull when it takes
// the member's nulls (`fill`: that member's value), else the column's.
std::optional<double> MemberFill(const Layout& layout, size_t field, double stack_fill) {
  if (layout.field_nulls_to_stack[field]) return stack_fill;
  return layout.field_fill_null[field];
}

// TileLeaf, throwing where Parquet's accessors do.
std::optional<int> TileLeafOrThrow(const Layout& layout, size_t field, int in_file,
                                   const std::vector<FlatField>& fields,
                                   const parquet::FileMetaData& metadata, DType matrix_dtype) {
  if (in_file < 0) return {};
  if (!layout.field_transforms[field].empty() || layout.field_from_strings[field]) return {};
  if (layout.field_raw_dtypes[field] != matrix_dtype ||
      layout.field_dtypes[field] != matrix_dtype) {
    return {};
  }
  // A struct's field is read as any column: a value where its definition
  // level is the greatest, a null where the field or a struct above it is.
  if (static_cast<size_t>(in_file) >= fields.size()) return {};
  const auto& schema_field = *fields[static_cast<size_t>(in_file)].node;
  if (!schema_field.is_leaf() || !schema_field.field) return {};
  const auto plain = PlainNumber(schema_field.field->type()->id());
  if (!plain || plain->first != matrix_dtype) return {};
  const int leaf = schema_field.column_index;
  if (leaf < 0 || leaf >= metadata.num_columns() || metadata.num_row_groups() < 1) return {};
  const auto* descr = metadata.schema()->Column(leaf);
  if (descr->physical_type() != plain->second || descr->max_repetition_level() != 0) return {};
  const auto row_group = metadata.RowGroup(0);
  const auto chunk = row_group->ColumnChunk(leaf);
  if (chunk->type() != plain->second) return {};
  // The matrix is made for the footer's row count before the pages have
  // told theirs: beyond kMaxExpansion bytes of values per stored byte (a
  // footer's lie, or runs of constants) the generic read, which reads the
  // pages first, takes the column.
  const int64_t rows = row_group->num_rows();
  const int64_t stored = std::max<int64_t>(chunk->total_compressed_size(), 1);
  if (rows < 0 || rows / kMaxExpansion > stored / static_cast<int64_t>(DTypeSize(matrix_dtype))) {
    return {};
  }
  if (descr->max_definition_level() > 0 && !MemberFill(layout, field, 0) && chunk->is_stats_set()) {
    // Known nulls and no fill: the generic read (which names the first
    // null), without a tile read wasted first.
    const auto stats = chunk->statistics();
    if (stats && stats->HasNullCount() && stats->null_count() > 0) return {};
  }
  return leaf;
}

// Moves the values of rows `keep` (ascending, each at least `r0`: rows of the
// row group) of one member's tile (its row r0 first) to the tile's front.
void CompactTile(uint8_t* tile, size_t elem, std::span<const int64_t> keep, int64_t r0) {
  auto move = [&]<typename T>(T* values) {
    for (size_t k = 0; k < keep.size(); ++k) {
      values[k] = values[static_cast<size_t>(keep[k] - r0)];  // k <= its source: in place
    }
  };
  if (elem == 4) {
    move(reinterpret_cast<uint32_t*>(tile));
  } else if (elem == 8) {
    move(reinterpret_cast<uint64_t*>(tile));
  } else {
    for (size_t k = 0; k < keep.size(); ++k) {
      std::memmove(tile + k * elem, tile + static_cast<size_t>(keep[k] - r0) * elem, elem);
    }
  }
}

}  // namespace

std::optional<int> TileLeaf(const Layout& layout, size_t field, int in_file,
                            const std::vector<FlatField>& fields,
                            const parquet::FileMetaData& metadata, DType matrix_dtype) {
  // Parquet's accessors throw on a footer they find inconsistent (a chunk's
  // type unlike its column's): the generic read then says what is wrong.
  try {
    return TileLeafOrThrow(layout, field, in_file, fields, metadata, matrix_dtype);
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<int> TileLeaves(const Layout& layout, const OutputPlan& plan, const FileEntry& file,
                            const std::vector<FlatField>& fields,
                            const parquet::FileMetaData& metadata) {
  std::vector<int> leaves;
  leaves.reserve(plan.sources.size());
  for (int s : plan.sources) {
    const auto f = static_cast<size_t>(s);
    const int field = layout.fields[f];
    const int in_file = file.field_map.empty() ? field : file.field_map[static_cast<size_t>(field)];
    leaves.push_back(
        TileLeaf(layout, f, in_file, fields, metadata, plan.matrix_dtype).value_or(-1));
  }
  return leaves;
}

bool GroupTiled(const std::vector<int>& leaves, size_t first, size_t last) {
  if (leaves.empty()) return false;
  return std::all_of(leaves.begin() + static_cast<std::ptrdiff_t>(first),
                     leaves.begin() + static_cast<std::ptrdiff_t>(last),
                     [](int leaf) { return leaf >= 0; });
}

arrow::Result<TileOutcome> ReadMembersTiled(parquet::ParquetFileReader& file, const Layout& layout,
                                            const OutputPlan& plan, size_t first, size_t last,
                                            std::span<const int> leaves, int64_t rows,
                                            const std::vector<int64_t>* selection, uint8_t* matrix,
                                            size_t* failed) {
  const size_t n = last - first;
  if (leaves.size() != n) {
    return Error(ErrorKind::kInvalidArgument, "ReadMembersTiled: a leaf per member");
  }
  const size_t elem = DTypeSize(plan.matrix_dtype);
  const size_t row_bytes = static_cast<size_t>(plan.width) * elem;
  *failed = 0;
  BEGIN_PARQUET_CATCH
  auto row_group = file.RowGroup(0);
  std::vector<std::shared_ptr<parquet::ColumnReader>> readers(n);
  for (size_t j = 0; j < n; ++j) {
    *failed = j;
    readers[j] = row_group->Column(leaves[j]);
  }
  // One buffer per member, and the transpose's view of them by field.
  std::vector<uint8_t> tile(n * static_cast<size_t>(kTileRows) * elem);
  std::vector<int16_t> defs(static_cast<size_t>(kTileRows));
  std::vector<DecodedColumn> columns(layout.fields.size());
  std::vector<std::optional<double>> fills(n);
  for (size_t j = 0; j < n; ++j) {
    const auto f = static_cast<size_t>(plan.sources[first + j]);
    fills[j] = MemberFill(layout, f, plan.fill.empty() ? 0.0 : plan.fill[first + j]);
  }
  for (size_t j = 0; j < n; ++j) {
    auto& column = columns[static_cast<size_t>(plan.sources[first + j])];
    column.dtype = plan.matrix_dtype;
    column.values = tile.data() + j * static_cast<size_t>(kTileRows) * elem;
  }
  const int64_t out_rows = selection ? static_cast<int64_t>(selection->size()) : rows;
  size_t next = 0;      // the first selected row not yet written
  int64_t written = 0;  // rows of the matrix written
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int64_t want = std::min(kTileRows, rows - r0);
    for (size_t j = 0; j < n; ++j) {
      *failed = j;
      auto* out = tile.data() + j * static_cast<size_t>(kTileRows) * elem;
      ARROW_ASSIGN_OR_RAISE(auto outcome, ReadTileOf(plan.matrix_dtype, readers[j].get(), want,
                                                     defs.data(), fills[j], out));
      if (outcome == TileOutcome::kNulls) return outcome;
    }
    int64_t count = want;
    if (selection) {
      const size_t from = next;
      while (next < selection->size() && (*selection)[next] < r0 + want) ++next;
      count = static_cast<int64_t>(next - from);
      if (count < want) {
        const std::span<const int64_t> kept(selection->data() + from, next - from);
        for (size_t j = 0; j < n; ++j) {
          CompactTile(tile.data() + j * static_cast<size_t>(kTileRows) * elem, elem, kept, r0);
        }
      }
    }
    if (count == 0) continue;
    ARROW_RETURN_NOT_OK(TransposeStack(layout, plan, columns, count,
                                       matrix + static_cast<size_t>(written) * row_bytes, first,
                                       last, out_rows));
    written += count;
  }
  for (size_t j = 0; j < n; ++j) {
    *failed = j;
    if (readers[j]->HasNext()) {
      return Error(ErrorKind::kInvalidData,
                   "more values than the footer's " + std::to_string(rows) + " rows");
    }
  }
  END_PARQUET_CATCH(ErrorContext{}, IoOutcome::kReadOk)
  return TileOutcome::kDone;
}

}  // namespace shardfeed
