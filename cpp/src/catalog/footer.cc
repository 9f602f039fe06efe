#include "catalog/footer.h"

#include <algorithm>
#include <exception>
#include <string>

#include <parquet/metadata.h>
#include <parquet/schema.h>

#include "shardfeed/status.h"

namespace shardfeed {

namespace {

std::string N(int64_t v) { return std::to_string(v); }

// Whether [offset, offset + length) lies inside a file of `size` bytes,
// without overflow for any inputs.
bool Inside(int64_t offset, int64_t length, int64_t size) {
  return offset >= 0 && length >= 0 && offset <= size && length <= size - offset;
}

// The most values `bytes` of column chunk can hold (see kMinPageBytes),
// saturated at INT64_MAX.
int64_t MaxValues(int64_t bytes) {
  const int64_t pages = bytes / kMinPageBytes + 1;
  return pages > INT64_MAX / kMaxRowGroupRows ? INT64_MAX : pages * kMaxRowGroupRows;
}

arrow::Status CheckColumnChunk(const parquet::ColumnChunkMetaData& chunk,
                               const parquet::ColumnDescriptor& leaf, int64_t rows,
                               int64_t file_size, const std::string& where) {
  const std::string at = where + ", column '" + leaf.path()->ToDotString() + "': ";
  auto bad = [&](const std::string& what) { return Error(ErrorKind::kInvalidData, at + what); };
  const int64_t size = chunk.total_compressed_size();
  if (!Inside(0, size, file_size)) {
    return bad("total_compressed_size " + N(size) + " is outside [0, " + N(file_size) + "]");
  }
  if (chunk.total_uncompressed_size() < 0) {
    return bad("negative total_uncompressed_size " + N(chunk.total_uncompressed_size()));
  }
  // ColumnChunk.file_offset is not checked: nothing reads it (Arrow finds a
  // chunk by its page offsets), and valid files disagree on what it means
  // (Polars writes one past the end of the file).
  // The chunk starts at its dictionary page when it has one (0 means none to
  // some writers, as Arrow's reader also assumes).
  int64_t start = chunk.data_page_offset();
  if (chunk.has_dictionary_page() && chunk.dictionary_page_offset() != 0) {
    const int64_t dict = chunk.dictionary_page_offset();
    if (!Inside(dict, 0, file_size)) {
      return bad("dictionary_page_offset " + N(dict) + " is outside the file of " + N(file_size) +
                 " bytes");
    }
    if (dict < start) start = dict;
  }
  // Its pages, the data pages last, lie inside the file.
  if (!Inside(start, size, file_size) || chunk.data_page_offset() - start > size) {
    return bad("data_page_offset " + N(chunk.data_page_offset()) + " with " + N(size) +
               " bytes from offset " + N(start) + " is outside the file of " + N(file_size) +
               " bytes");
  }
  // Every row puts exactly one value (or null) in a flat column, and at least
  // one level in a repeated one (an empty or null list still writes one).
  const int64_t values = chunk.num_values();
  const bool repeated = leaf.max_repetition_level() > 0;
  if (repeated ? values < rows : values != rows) {
    return bad("num_values " + N(values) + " does not fit the row group's " + N(rows) + " rows");
  }
  if (values > MaxValues(size)) {
    return bad("num_values " + N(values) + " cannot fit in " + N(size) + " bytes");
  }
  return arrow::Status::OK();
}

arrow::Status CheckRowGroup(const parquet::FileMetaData& metadata, int g, int64_t file_size,
                            const std::string& rel_path) {
  const std::string where = "file '" + rel_path + "', row group " + std::to_string(g);
  auto rg = metadata.RowGroup(g);
  const int64_t rows = rg->num_rows();
  if (rows < 0 || rows > kMaxRowGroupRows) {
    return Error(ErrorKind::kInvalidData,
                 where + ": num_rows " + N(rows) + " is outside [0, " + N(kMaxRowGroupRows) + "]");
  }
  const int leaves = metadata.schema()->num_columns();
  if (rg->num_columns() != leaves) {
    return Error(ErrorKind::kInvalidData, where + ": " + std::to_string(rg->num_columns()) +
                                              " column chunks for a schema of " +
                                              std::to_string(leaves) + " leaf columns");
  }
  // A summary file (Spark's and Dask's `_metadata`, renamed or named alone)
  // holds the footers of other files: its chunks lie there, not in it.
  for (int c = 0; c < leaves; ++c) {
    const std::string other = rg->ColumnChunk(c)->file_path();
    if (!other.empty()) {
      return Error(ErrorKind::kInvalidData,
                   where + ": its column chunks lie in another file ('" + other +
                       "'): a summary file such as _metadata, which holds other files' "
                       "footers and no data; read the folder or the files it names");
    }
  }
  const int64_t rg_bytes = rg->total_compressed_size();
  if (!Inside(0, rg_bytes, file_size)) {
    return Error(ErrorKind::kInvalidData, where + ": total_compressed_size " + N(rg_bytes) +
                                              " is outside [0, " + N(file_size) + "]");
  }
  if (rows == 0) return arrow::Status::OK();  // never read
  int64_t bytes = 0;  // of its chunks; each is at most the file size: no overflow
  for (int c = 0; c < leaves; ++c) {
    auto chunk = rg->ColumnChunk(c);
    ARROW_RETURN_NOT_OK(
        CheckColumnChunk(*chunk, *metadata.schema()->Column(c), rows, file_size, where));
    bytes = std::min(file_size, bytes + chunk->total_compressed_size());
  }
  if (rows / kMaxRowsPerByte > bytes) {
    return Error(ErrorKind::kInvalidData, where + ": num_rows " + N(rows) + " in " + N(bytes) +
                                              " bytes of column chunks is implausible (over " +
                                              N(kMaxRowsPerByte) + " rows per byte)");
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Status ValidateFooter(const parquet::FileMetaData& metadata, int64_t file_size,
                             const std::string& rel_path) {
  const std::string file = "file '" + rel_path + "'";
  try {
    int64_t sum = 0;  // at most 2^31 row groups of at most 2^31 - 1 rows: no overflow
    for (int g = 0; g < metadata.num_row_groups(); ++g) {
      ARROW_RETURN_NOT_OK(CheckRowGroup(metadata, g, file_size, rel_path));
      sum += metadata.RowGroup(g)->num_rows();
    }
    if (metadata.num_rows() != sum) {
      return Error(ErrorKind::kInvalidData, file + ": num_rows " + N(metadata.num_rows()) +
                                                " differs from the " + N(sum) +
                                                " rows of its row groups");
    }
  } catch (const std::exception& e) {  // Arrow's accessors throw on malformed metadata
    return Error(ErrorKind::kInvalidData, file + ": bad footer (" + e.what() + ")");
  }
  return arrow::Status::OK();
}

}  // namespace shardfeed
