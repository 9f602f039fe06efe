// Table formats whose folders hold superseded data files (internal).
//
// An Apache Iceberg table keeps the data files of older snapshots (rows later
// deleted or rewritten) until they expire, and an Apache Hudi table several
// versions of each file group until its cleaner runs; only their metadata
// tells the live files apart.  Reading every Parquet file below such a folder
// would deliver stale and duplicate rows without a word, so the catalog
// refuses it and says what to pass instead.
#pragma once

#include <string>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/status.h>

namespace shardfeed {

// An error naming the table when a file of `listed` (every file below source
// folder `base`, shown as `shown` in errors) is a data file of an Iceberg or
// Hudi table below or at `base`; tables whose root is in `delta_roots` (Delta
// tables that also write Iceberg metadata) are read through their Delta log
// and pass.  For each folder named "data" at or above `base`, its sibling
// "metadata" folder is looked at too (an Iceberg table's data folder, or a
// partition folder in it, given on its own), within `remote_timeout` seconds
// each on a remote filesystem.
arrow::Status CheckTableFormats(arrow::fs::FileSystem& fs, const std::string& base,
                                const std::vector<arrow::fs::FileInfo>& listed,
                                const std::vector<std::string>& delta_roots,
                                const std::string& shown, double remote_timeout);

}  // namespace shardfeed
