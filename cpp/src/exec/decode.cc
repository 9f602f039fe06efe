#include "exec/decode.h"

#include <cstring>
#include <string>

#include <arrow/array.h>
#include <arrow/array/concatenate.h>
#include <arrow/buffer.h>
#include <arrow/filesystem/filesystem.h>
#include <arrow/table.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/float16.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "exec/assemble.h"
#include "shardfeed/status.h"

namespace shardfeed {

namespace {

void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>* out) {
  if (field.is_leaf()) {
    out->push_back(field.column_index);
    return;
  }
  for (const auto& child : field.children) CollectLeaves(child, out);
}

template <typename T>
void FillTyped(uint8_t* values, const arrow::Array& validity_of, int64_t count, double fill,
               int64_t stride) {
  auto* typed = reinterpret_cast<T*>(values);
  for (int64_t i = 0; i < count; ++i) {
    if (validity_of.IsNull(i)) {
      for (int64_t j = 0; j < stride; ++j) typed[i * stride + j] = static_cast<T>(fill);
    }
  }
}

// Writes `fill` into every element i*stride..(i+1)*stride of `values` whose
// entry i in `validity_of` is null.
void FillNulls(DType dtype, uint8_t* values, const arrow::Array& validity_of, double fill,
               int64_t stride = 1) {
  const int64_t n = validity_of.length();
  switch (dtype) {
    case DType::kBool:
      return FillTyped<uint8_t>(values, validity_of, n, fill != 0 ? 1 : 0, stride);
    case DType::kInt8:
      return FillTyped<int8_t>(values, validity_of, n, fill, stride);
    case DType::kInt16:
      return FillTyped<int16_t>(values, validity_of, n, fill, stride);
    case DType::kInt32:
      return FillTyped<int32_t>(values, validity_of, n, fill, stride);
    case DType::kInt64:
      return FillTyped<int64_t>(values, validity_of, n, fill, stride);
    case DType::kUInt8:
      return FillTyped<uint8_t>(values, validity_of, n, fill, stride);
    case DType::kUInt16:
      return FillTyped<uint16_t>(values, validity_of, n, fill, stride);
    case DType::kUInt32:
      return FillTyped<uint32_t>(values, validity_of, n, fill, stride);
    case DType::kUInt64:
      return FillTyped<uint64_t>(values, validity_of, n, fill, stride);
    case DType::kFloat16: {
      const uint16_t bits = arrow::util::Float16(static_cast<float>(fill)).bits();
      auto* typed = reinterpret_cast<uint16_t*>(values);
      for (int64_t i = 0; i < n; ++i) {
        if (validity_of.IsNull(i)) {
          for (int64_t j = 0; j < stride; ++j) typed[i * stride + j] = bits;
        }
      }
      return;
    }
    case DType::kFloat32:
      return FillTyped<float>(values, validity_of, n, fill, stride);
    case DType::kFloat64:
      return FillTyped<double>(values, validity_of, n, fill, stride);
  }
}

// Flat values of a primitive (or bool) array, with nulls filled; copies only
// when the array is bool or has nulls.
arrow::Status FlattenPrimitive(const std::shared_ptr<arrow::Array>& array, DType dtype,
                               const Layout& layout, const std::string& context,
                               DecodedColumn* out) {
  const int64_t n = array->length();
  const bool has_nulls = array->null_count() > 0;
  if (has_nulls && !layout.fill_null) {
    int64_t first = 0;
    while (first < n && !array->IsNull(first)) ++first;
    return Error(ErrorKind::kInvalidData, context + ": null value at row " + std::to_string(first) +
                                              " (pass fill_null=<value> to replace nulls)");
  }
  const size_t width = DTypeSize(dtype);
  if (dtype == DType::kBool) {
    ARROW_ASSIGN_OR_RAISE(out->owned, arrow::AllocateBuffer(std::max<int64_t>(n, 1)));
    auto* dst = out->owned->mutable_data();
    const auto& bools = static_cast<const arrow::BooleanArray&>(*array);
    for (int64_t i = 0; i < n; ++i) dst[i] = bools.Value(i) ? 1 : 0;
  } else if (has_nulls) {
    const auto* src = array->data()->GetValues<uint8_t>(1, array->offset() * width);
    ARROW_ASSIGN_OR_RAISE(
        out->owned, arrow::AllocateBuffer(std::max<int64_t>(n * static_cast<int64_t>(width), 1)));
    std::memcpy(out->owned->mutable_data(), src, static_cast<size_t>(n) * width);
  }
  if (out->owned) {
    if (has_nulls) FillNulls(dtype, out->owned->mutable_data(), *array, *layout.fill_null);
    out->values = out->owned->data();
  } else {
    out->values = array->data()->GetValues<uint8_t>(1, array->offset() * width);
  }
  out->array = array;
  return arrow::Status::OK();
}

arrow::Status Normalize(const std::shared_ptr<arrow::Array>& array, DType dtype,
                        const Layout& layout, const std::string& context, DecodedColumn* out) {
  switch (array->type_id()) {
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListArray&>(*array);
      const int64_t size = list.list_type()->list_size();
      auto child = list.values()->Slice(list.value_offset(0), list.length() * size);
      ARROW_RETURN_NOT_OK(FlattenPrimitive(child, dtype, layout, context, out));
      if (list.null_count() > 0) {
        if (!layout.fill_null) {
          return Error(ErrorKind::kInvalidData, context + ": null list (pass fill_null=<value>)");
        }
        if (!out->owned) {
          const size_t bytes = static_cast<size_t>(child->length()) * DTypeSize(dtype);
          ARROW_ASSIGN_OR_RAISE(
              out->owned, arrow::AllocateBuffer(std::max<int64_t>(static_cast<int64_t>(bytes), 1)));
          std::memcpy(out->owned->mutable_data(), out->values, bytes);
          out->values = out->owned->data();
        }
        FillNulls(dtype, out->owned->mutable_data(), list, *layout.fill_null, size);
      }
      out->list_size = size;
      out->array = array;
      return arrow::Status::OK();
    }
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      const int64_t n = array->length();
      if (array->null_count() > 0 && !layout.fill_null) {
        return Error(ErrorKind::kInvalidData, context + ": null list (pass fill_null=<value>)");
      }
      std::shared_ptr<arrow::Array> values;
      auto offset_of = [&](int64_t i) -> int64_t {
        if (array->type_id() == arrow::Type::LARGE_LIST) {
          return static_cast<const arrow::LargeListArray&>(*array).value_offset(i);
        }
        return static_cast<const arrow::ListArray&>(*array).value_offset(i);
      };
      values = array->type_id() == arrow::Type::LARGE_LIST
                   ? static_cast<const arrow::LargeListArray&>(*array).values()
                   : static_cast<const arrow::ListArray&>(*array).values();
      const int64_t base = offset_of(0);
      out->list_starts.resize(static_cast<size_t>(n));
      out->list_lengths.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        out->list_starts[static_cast<size_t>(i)] = offset_of(i) - base;
        // A null list becomes an empty one (only reached with fill_null set).
        out->list_lengths[static_cast<size_t>(i)] =
            array->IsNull(i) ? 0 : offset_of(i + 1) - offset_of(i);
      }
      auto child = values->Slice(base, offset_of(n) - base);
      ARROW_RETURN_NOT_OK(FlattenPrimitive(child, dtype, layout, context, out));
      out->array = array;
      return arrow::Status::OK();
    }
    default:
      return FlattenPrimitive(array, dtype, layout, context, out);
  }
}

}  // namespace

arrow::Result<std::shared_ptr<const DecodedRowGroup>> DecodeRowGroup(const Catalog& catalog,
                                                                     int32_t rg_index,
                                                                     const Layout& layout) {
  const auto& rg = catalog.row_groups()[static_cast<size_t>(rg_index)];
  const auto& file = catalog.files()[static_cast<size_t>(rg.file)];
  const std::string context =
      "file '" + file.rel_path + "', row group " + std::to_string(rg.row_group);

  arrow::fs::FileInfo info(file.path, arrow::fs::FileType::File);
  info.set_size(file.size);
  auto maybe_input = catalog.filesystem()->OpenInputFile(info);
  if (!maybe_input.ok()) return WithContext(maybe_input.status(), context);

  std::unique_ptr<parquet::arrow::FileReader> reader;
  try {
    auto pq = parquet::ParquetFileReader::Open(*maybe_input, parquet::default_reader_properties(),
                                               file.metadata);
    parquet::ArrowReaderProperties props;
    props.set_use_threads(false);  // the engine parallelizes across row groups
    auto maybe_reader =
        parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), props);
    if (!maybe_reader.ok()) return WithContext(maybe_reader.status(), context);
    reader = std::move(*maybe_reader);
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData, context + ": " + e.what());
  }

  const auto& manifest = reader->manifest();
  std::vector<std::vector<int>> leaves(layout.fields.size());
  std::vector<int> all_leaves;
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    CollectLeaves(manifest.schema_fields[static_cast<size_t>(layout.fields[i])], &leaves[i]);
    all_leaves.insert(all_leaves.end(), leaves[i].begin(), leaves[i].end());
  }

  auto read = [&](const std::vector<int>& columns) -> arrow::Result<std::shared_ptr<arrow::Table>> {
    try {
      return reader->ReadRowGroup(rg.row_group, columns);
    } catch (const std::exception& e) {
      return arrow::Status::IOError(e.what());
    }
  };
  auto maybe_table = read(all_leaves);
  if (!maybe_table.ok()) {
    // Single out the column that fails, so the message can name it.
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      auto single = read(leaves[i]);
      if (!single.ok()) {
        return Error(ErrorKind::kInvalidData, context + ", column '" + layout.field_names[i] +
                                                  "': " + single.status().message());
      }
    }
    return Error(ErrorKind::kInvalidData, context + ": " + maybe_table.status().message());
  }
  const auto& table = *maybe_table;
  if (table->num_rows() != rg.num_rows) {
    return Error(ErrorKind::kInvalidData,
                 context + ": decoded " + std::to_string(table->num_rows()) +
                     " rows, the footer says " + std::to_string(rg.num_rows));
  }

  auto decoded = std::make_shared<DecodedRowGroup>();
  decoded->index = rg_index;
  decoded->first_row = rg.first_row;
  decoded->num_rows = rg.num_rows;
  decoded->bytes = rg.total_bytes;
  decoded->columns.resize(layout.fields.size());
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    const std::string column_context = context + ", column '" + layout.field_names[i] + "'";
    const auto& chunked = table->column(static_cast<int>(i));
    std::shared_ptr<arrow::Array> array;
    if (chunked->num_chunks() == 1) {
      array = chunked->chunk(0);
    } else {
      auto maybe = arrow::Concatenate(chunked->chunks());
      if (!maybe.ok()) return WithContext(maybe.status(), column_context);
      array = *maybe;
    }
    ARROW_RETURN_NOT_OK(
        Normalize(array, layout.field_dtypes[i], layout, column_context, &decoded->columns[i]));
  }
  // Stacks become row-major matrices once per row group; columns that only
  // feed stacks are then dropped, so memory stays one copy of the data.
  decoded->stacks.resize(layout.outputs.size());
  for (size_t o = 0; o < layout.outputs.size(); ++o) {
    const auto& plan = layout.outputs[o];
    if (plan.kind != OutputKind::kStack) continue;
    const int64_t bytes = rg.num_rows * plan.width * static_cast<int64_t>(DTypeSize(plan.dtype));
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> matrix,
                          arrow::AllocateBuffer(std::max<int64_t>(bytes, 1)));
    ARROW_RETURN_NOT_OK(
        TransposeStack(layout, plan, decoded->columns, rg.num_rows, matrix->mutable_data()));
    decoded->stacks[o] = std::move(matrix);
  }
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    if (!layout.field_used_alone[i]) decoded->columns[i] = DecodedColumn{};
  }
  return std::shared_ptr<const DecodedRowGroup>(std::move(decoded));
}

}  // namespace shardfeed
