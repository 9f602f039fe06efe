// Noticing a file that changed after the catalog read its footer (internal).
//
// The catalog reads footers once; a file rewritten later (same size or not)
// would be decoded with the old footer, or mix rows of both versions in one
// epoch.  Each read of a row group checks the file against what the catalog
// saw, and a difference is an InvalidData error naming the file.
#pragma once

#include <string>

#include <arrow/filesystem/filesystem.h>
#include <arrow/status.h>

#include "shardfeed/catalog.h"

namespace shardfeed {

// What identifies one version of a local file beyond size and mtime: device,
// inode and status-change time (which os.utime cannot set back).  Empty when
// the file cannot be stat'ed.
std::string LocalIdentity(const std::string& path);

// OK when `file` on `fs` still has the size, modification time (and, locally,
// identity) recorded in the catalog.  Remote modification times are compared
// to the second: listings and HEAD requests round them differently.  The
// caller adds the context (file, row group) to the error.
arrow::Status CheckUnchanged(arrow::fs::FileSystem& fs, const FileEntry& file);

}  // namespace shardfeed
