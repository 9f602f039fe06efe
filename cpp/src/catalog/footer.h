// Checks every number of a Parquet footer that shardfeed uses against the file
// before anything trusts it (design invariant 8, issue 10) (internal).
#pragma once

#include <cstdint>
#include <string>

#include <arrow/status.h>

namespace parquet {
class FileMetaData;
}

namespace shardfeed {

// The most rows a row group may hold.  Why a cap at all: the plan and the
// engine size memory by a row group's rows (8 bytes per row for a window's
// permutation, at least one byte per row and column when decoded), so a footer
// that claims 2^32 rows must be refused before anything is allocated; and a
// Parquet page counts its values in an i32, Arrow's decoders index a column
// chunk's values with 32-bit offsets for strings and lists, and no writer we
// know makes row groups of more than 2^31 - 1 rows (pyarrow: 1 Mi by default,
// Spark and DuckDB: ~128 MB or 122,880 rows).
constexpr int64_t kMaxRowGroupRows = INT32_MAX;

// The fewest bytes a Parquet page can take: its Thrift header alone holds
// four required i32 fields and a data page header of four more (one byte of
// field header and at least one of value each, two stop bytes).  Hence a
// column chunk of S bytes holds at most ceil(S / 17) pages, each of at most
// 2^31 - 1 values: the only bound on values per byte that no valid file can
// break, because run-length encoding stores a run of any length in a few
// bytes (an all-null or constant column of a billion rows can take 30 bytes).
constexpr int64_t kMinPageBytes = 17;

// The most rows per byte of a row group's column chunks.  Run-length encoding
// lets a valid file go beyond any such ratio, but only when every column of
// the row group is constant or null, and even then the writers we know stay
// far below it: Arrow (since 15) and parquet-mr (since 1.12) start a page of
// >= 20 bytes every 20,000 rows (<= 1,000 rows per byte), DuckDB and Polars
// write one page per row group of 122,880 or 262,144 rows (~4K-9K rows per
// byte).  Why bound it: a footer can raise a row group's count, its chunks'
// num_values and the file total together, which no other check catches before
// the plan sizes a window's permutation by it (8 bytes per row): this caps that
// at 512 KiB per byte of the file, and decoding (which reads the pages) then
// reports the lie.
constexpr int64_t kMaxRowsPerByte = int64_t{1} << 16;

// OK when `metadata` is consistent with a file of `file_size` bytes: row counts
// are in [0, kMaxRowGroupRows] and add up to the file's; each row group has one
// column chunk per leaf of the schema, each chunk lies inside the file and
// counts as many values as the row group has rows (at least as many for
// repeated columns, at most what its bytes can hold), and the rows are at most
// kMaxRowsPerByte per byte of the chunks.  Otherwise an
// InvalidData error naming `rel_path` and the row group (and column).
arrow::Status ValidateFooter(const parquet::FileMetaData& metadata, int64_t file_size,
                             const std::string& rel_path);

}  // namespace shardfeed
