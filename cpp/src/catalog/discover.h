// Which files of a dataset folder are data, as Spark, Hive and pyarrow.dataset
// decide it (internal).
#pragma once

#include <cstdint>
#include <string>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace shardfeed {

// True when a component of `rel_path` (relative to the dataset root) starts
// with '_' or '.': _temporary/ (failed or running Spark tasks), _SUCCESS,
// _metadata, .crc files.  Such paths are never data.
bool IsHiddenPath(const std::string& rel_path);

// True when `name` ends in ".parquet": such files must be Parquet (an error
// otherwise); any other file is read only when its magic bytes say Parquet.
bool HasParquetExtension(const std::string& name);

// Checks the 4-byte "PAR1" magic at both ends of a `size`-byte file: two tiny
// reads, so that files without the extension are recognized before their
// footer is read.
arrow::Result<bool> HasParquetMagic(arrow::io::RandomAccessFile& file, int64_t size);

}  // namespace shardfeed
