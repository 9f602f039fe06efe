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
// is read twice.  Elsewhere Arrow's recursive listing is used (ListWithin).
// `shown` names the source in errors.
arrow::Result<std::vector<arrow::fs::FileInfo>> ListFiles(arrow::fs::FileSystem& fs,
                                                          const std::string& dir,
                                                          const std::string& shown,
                                                          double remote_timeout);

// What `selector` lists on `fs`.  On S3, page by page (one page: one LIST
// request): each page must come within `remote_timeout` seconds (0: no
// deadline), else a StorageError; a listing of a million keys takes as long as
// it needs while its pages keep coming, and a server that stops answering
// mid-listing no longer holds the caller until its connection drops.  Other
// filesystems list in one call without a deadline (Arrow pages only S3).
arrow::Result<std::vector<arrow::fs::FileInfo>> ListWithin(arrow::fs::FileSystem& fs,
                                                           const arrow::fs::FileSelector& selector,
                                                           double remote_timeout);

// An object-store key with a "." or ".." component ("bucket/x/../y.parquet")
// is an InvalidArgument error: S3 clients normalize it and would serve another
// object's bytes under this name.  Local paths are not checked (the OS
// resolves them the same way each time).
arrow::Status CheckObjectKey(const arrow::fs::FileSystem& fs, const std::string& path,
                             const std::string& shown);

}  // namespace shardfeed
