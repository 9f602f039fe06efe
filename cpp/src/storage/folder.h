// Cache folders that only their owner can read or write.
//
// A cache folder holds files that later runs trust (after validating them):
// another user who could plant or swap entries there could feed us their
// bytes, and one who could read it would see the data.  So a folder the cache
// creates, and each parent it creates on the way, gets mode 0700 whatever the
// umask; an existing folder owned by someone else, or writable by group or
// others, is refused.
#pragma once

#include <string>

#include <arrow/status.h>

namespace shardfeed::storage_internal {

// Creates `dir` (and missing parents) with mode 0700, or checks the existing
// one.  `what` names the folder in messages ("cache folder").  Errors:
// kInvalidArgument for a folder that is not one or that others control,
// kStorage when it cannot be created.
arrow::Status MakePrivateFolder(const std::string& dir, const std::string& what);

}  // namespace shardfeed::storage_internal
