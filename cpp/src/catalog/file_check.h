// Noticing a file that changed after the catalog read its footer (internal).
//
// The catalog reads footers once; a file rewritten later (same size or not)
// would be decoded with the old footer, or mix rows of both versions in one
// epoch.  Each read of a row group checks the file against what the catalog
// saw, and a difference is an InvalidData error naming the file.
#pragma once

#include <functional>
#include <string>

#include <arrow/filesystem/filesystem.h>
#include <arrow/status.h>

#include "shardfeed/catalog.h"

namespace shardfeed {

// OK when `file` on `fs` still has the size, modification time (and, locally,
// identity) recorded in the catalog.  Remote modification times are compared
// to the second: listings and HEAD requests round them differently.  The
// caller adds the context (file, row group) to the error.
// A remote HEAD request that takes more than `timeout_seconds` (> 0) is a
// StorageError; one still waiting when `stopped()` turns true is Cancelled.
using StopCheck = std::function<bool()>;
arrow::Status CheckUnchanged(arrow::fs::FileSystem& fs, const FileEntry& file,
                             double timeout_seconds = 0, const StopCheck& stopped = nullptr);

// The remote half of CheckUnchanged: `path` still has `size` bytes and the
// modification time `version` (ns as text; empty: not compared).
// `setting_seconds` (> 0): the remote_timeout an error names, where
// `timeout_seconds` is what is left of it.
arrow::Status CheckRemoteUnchanged(arrow::fs::FileSystem& fs, const std::string& path, int64_t size,
                                   const std::string& version, double timeout_seconds = 0,
                                   const StopCheck& stopped = nullptr, double setting_seconds = 0);

// fs.GetFileInfo(path), but a remote filesystem that does not answer within
// `timeout_seconds` (> 0) gives a StorageError instead of a stall, and a wait
// ends (Cancelled) soon after `stopped()` turns true.
arrow::Result<arrow::fs::FileInfo> FileInfoWithin(arrow::fs::FileSystem& fs,
                                                  const std::string& path, double timeout_seconds,
                                                  const StopCheck& stopped = nullptr,
                                                  double setting_seconds = 0);

}  // namespace shardfeed
