// A fused stack's members decoded a tile at a time straight into its matrix
// (internal).
//
// The generic read makes an Arrow array per column (values, plus a validity
// bitmap built from the definition levels) and then transposes the arrays
// into the matrix: the decoded values go through main memory twice.  When the
// members are plain numbers of the matrix's own type with no transform of
// their own, Parquet's column readers can instead decode kTileRows values of
// each member into a small buffer that stays in cache, transposed into the
// matrix at once; no bitmap is built, and nulls are filled as they are read
// (the column's fill_null, or the stack's FillNull).  What does not qualify,
// or holds a null with no fill, is read the generic way: the values are the
// same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <arrow/result.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>

#include "shardfeed/batch.h"
#include "shardfeed/catalog.h"
#include "transform/layout.h"
#include "util/struct_fields.h"

namespace shardfeed {

// Rows of every member decoded before they are transposed (16 float32
// members: 128 KiB, within L2).
inline constexpr int64_t kTileRows = 2048;

// The leaf column of `field` (the dataset field, `in_file` its field in the
// file) when the tile read can decode it into a matrix of `matrix_dtype`:
// a flat column whose Arrow type is that dtype with no conversion (float32 /
// float64 / int32 / int64 from FLOAT / DOUBLE / INT32 / INT64), with no
// transform; without a fill, one whose statistics count no null.
// `fields`: the file's (FlattenStructs of its manifest), which `in_file` indexes.
std::optional<int> TileLeaf(const Layout& layout, size_t field, int in_file,
                            const std::vector<FlatField>& fields,
                            const parquet::FileMetaData& metadata, DType matrix_dtype);

// The leaf column of each member of the fused stack `plan` that the tile read
// can take (TileLeaf), -1 for the others.  `file`: the catalog's entry of the
// file read (its field_map), `fields` and `metadata` its own.
std::vector<int> TileLeaves(const Layout& layout, const OutputPlan& plan, const FileEntry& file,
                            const std::vector<FlatField>& fields,
                            const parquet::FileMetaData& metadata);

// Whether the tile read takes members [first, last) (their leaves: `leaves`,
// from TileLeaves; empty when none is taken): only a whole group is.
bool GroupTiled(const std::vector<int>& leaves, size_t first, size_t last);

// How a tile read ended.
enum class TileOutcome {
  kDone,   // every member's rows are in the matrix
  kNulls,  // a member holds a null and has no fill: read the group the generic way
};

// Decodes the `rows` rows of members [first, last) of stack `plan` (their
// leaf columns in `leaves`, of row group 0 of `file`) into the matrix's
// columns first..last-1, nulls filled.  With a `selection` (ascending row
// indices below `rows`: a filter's or a deletion vector's live rows; null:
// every row), only those rows, in order: each tile is compacted while it is
// in cache.  A column
// with fewer or more values than `rows` is InvalidData naming it; on an error
// *failed is the member (index into leaves) whose read failed.
arrow::Result<TileOutcome> ReadMembersTiled(parquet::ParquetFileReader& file, const Layout& layout,
                                            const OutputPlan& plan, size_t first, size_t last,
                                            std::span<const int> leaves, int64_t rows,
                                            const std::vector<int64_t>* selection, uint8_t* matrix,
                                            size_t* failed);

}  // namespace shardfeed
