// How the engine opens a catalog file for decoding (the identity that both
// cache tiers key a file on is CacheKey, in shardfeed/catalog.h).
//
// Local files are opened on the catalog's filesystem; remote ones either
// through the opener the engine installs (the node-local file cache) or
// straight from their filesystem with every ranged read retried (RemoteFile).
// Either way the file is wrapped in a read tracker, so that a decoding
// failure can be told apart: a read that failed is the storage's fault
// (StorageError), a failure after every read succeeded is the bytes' fault
// (InvalidDataError).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "shardfeed/catalog.h"
#include "util/parquet_error.h"

namespace shardfeed {

// Opens catalog file `file`; installed by the engine when a file cache serves
// remote files.
using FileOpener =
    std::function<arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>>(int32_t file)>;

// The first failed read of a file, shared by the tracker and its opener.
class ReadFailure {
 public:
  void Record(const arrow::Status& status);
  arrow::Status first() const;  // OK while every read succeeded

  // The status for `status`, met while reading the tracked file: the
  // storage's fault (kStorage) when a read failed, else the bytes'.
  arrow::Status Classify(const arrow::Status& status, const ErrorContext& at) const;

 private:
  mutable std::mutex mu_;
  arrow::Status first_;
};

struct OpenedFile {
  std::shared_ptr<arrow::io::RandomAccessFile> file;  // reads go through the tracker
  std::shared_ptr<ReadFailure> failure;
};

// Opens catalog file `file` with `opener` when set, else on the catalog's
// filesystem (remote reads retried, no retry past `remote_timeout` seconds
// from now when > 0).  Errors are kStorage (or kNotFound).
arrow::Result<OpenedFile> OpenCatalogFile(const Catalog& catalog, int32_t file,
                                          const FileOpener& opener, double remote_timeout = 0);

}  // namespace shardfeed
