// The one error path from Parquet and Arrow into shardfeed's error kinds.
//
// Parquet's C++ reader throws (parquet::ParquetException and friends, and
// std::bad_alloc / std::length_error when a length read from a damaged file
// sizes an allocation); Arrow returns Status codes that say little about
// whose fault a failure is.  Every place that reads Parquet goes through the
// helpers below, so the same failure always becomes the same kind:
//   - an I/O failure of the storage layer        -> kStorage (StorageError)
//   - bad bytes (not Parquet, truncated, corrupt) -> kInvalidData
//   - memory that cannot be had                   -> OutOfMemory (MemoryError)
//   - a status that already carries a kind (from shardfeed code) keeps it.
// Every message starts with the file, row group and column involved.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include <arrow/status.h>

namespace shardfeed {

struct ErrorContext {
  std::string file;        // relative path; empty: none
  int32_t row_group = -1;  // -1: none
  std::string column;      // empty: none
  std::string detail;      // e.g. "not a readable Parquet file"; empty: none

  ErrorContext WithColumn(std::string name) const;
  // "file 'a.parquet', row group 2, column 'v'"
  std::string ToString() const;
};

// Whether the bytes reached the reader intact: callers that wrap the input
// in a read tracker (storage/open.h) know; the others do not.
enum class IoOutcome {
  kUnknown,  // an IOError is taken for a storage failure
  kReadOk,   // every read of the file succeeded: any failure is the bytes' fault
};

// The status for a failure `status` met while reading Parquet.
arrow::Status ParquetStatus(const arrow::Status& status, const ErrorContext& context,
                            IoOutcome io = IoOutcome::kUnknown);

// The status for an exception thrown while reading Parquet.
arrow::Status ParquetExceptionStatus(const std::exception_ptr& error, const ErrorContext& context,
                                     IoOutcome io = IoOutcome::kUnknown);

// Only for allocation failure in shardfeed's own code: OutOfMemory with context.
arrow::Status OutOfMemory(const std::string& context, int64_t bytes);

}  // namespace shardfeed

// Wrap a block that calls Parquet code that may throw; the enclosing function
// returns arrow::Status or arrow::Result<T>.
#define BEGIN_PARQUET_CATCH try {
#define END_PARQUET_CATCH(context, io)                                                 \
  }                                                                                    \
  catch (...) {                                                                        \
    return ::shardfeed::ParquetExceptionStatus(std::current_exception(), context, io); \
  }
