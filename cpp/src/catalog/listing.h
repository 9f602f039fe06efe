// Listing a dataset's Parquet files without reading any twice, and without
// letting an object key alias another (internal to the catalog).
#pragma once

#include <string>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/result.h>
#include <arrow/status.h>

namespace shardfeed {

// Every file below directory `dir` of `fs`.  On the local filesystem
// directory symlinks are followed at most once: a directory reached again (by
// device and inode) — a loop, or a second link to it — is skipped, so no file
// is read twice.  Elsewhere Arrow's recursive listing is used.  `shown` names
// the source in errors.
arrow::Result<std::vector<arrow::fs::FileInfo>> ListFiles(arrow::fs::FileSystem& fs,
                                                          const std::string& dir,
                                                          const std::string& shown);

// An object-store key with a "." or ".." component ("bucket/x/../y.parquet")
// is an InvalidArgument error: S3 clients normalize it and would serve another
// object's bytes under this name.  Local paths are not checked (the OS
// resolves them the same way each time).
arrow::Status CheckObjectKey(const arrow::fs::FileSystem& fs, const std::string& path,
                             const std::string& shown);

}  // namespace shardfeed
