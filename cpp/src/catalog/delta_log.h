// Delta Lake tables (internal).
//
// A folder with a `_delta_log/` is a Delta table.  Its data is not every
// Parquet file in the folder: an overwrite, a DELETE, an UPDATE or an OPTIMIZE
// writes new files and *removes* old ones in the log, and the old files stay
// on disk until a VACUUM.  Reading the folder as plain Parquet would mix
// versions.  The live files of the table's latest version are found by
// replaying the log as the Delta protocol says: the newest complete classic
// checkpoint (`N.checkpoint.parquet`, or its parts), then every JSON commit
// after it, in order; each commit's `remove` actions before its `add` actions.
//
// A live file's deletion vector (catalog/deletion_vector.h) is read with the
// log: its rows are left out of every stream.
//
// Refused, with an error naming the table and the reason (reading on would
// give other rows than the table holds): a reader protocol above 3, a reader
// feature not listed in delta_log.cc, column mapping by name or id, a
// deletion vector that cannot be read, a file path outside the table, a gap
// in the log, a live file missing from the folder (checked by the catalog).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "catalog/column_mapping.h"
#include "catalog/deletion_vector.h"

namespace shardfeed {

// One table: its folder and the files its latest version holds.
struct DeltaTable {
  std::string root;                // the table's folder (a path of the filesystem)
  std::string name;                // how errors name it
  int64_t version = -1;            // the log's latest version
  std::vector<std::string> files;  // live data files, relative to root, URL-decoded, sorted
  // Per file: its deletion vector (nullopt: none), and the rows it deletes once
  // read (null until then, and without one).
  std::vector<std::optional<DeletionVectorDescriptor>> dvs;
  std::vector<std::shared_ptr<const DeletedRows>> deleted;
  // Column mapping by name: its files' physical column names -> the table's.
  std::shared_ptr<const ColumnMapping> mapping;
};

// The Delta tables among `listed` (every file below a folder source): each
// folder with a `_delta_log/` that holds a commit or a checkpoint.  `base` is
// the source folder, `shown` its text for errors.
arrow::Result<std::vector<DeltaTable>> ReadDeltaTables(
    arrow::fs::FileSystem& fs, const std::string& base,
    const std::vector<arrow::fs::FileInfo>& listed, const std::string& shown,
    double remote_timeout);

// Which files of a folder listing its Delta tables keep.
class DeltaFilter {
 public:
  explicit DeltaFilter(const std::vector<DeltaTable>& tables) : tables_(tables) {
    for (const auto& table : tables) found_.emplace_back(table.files.size(), false);
  }
  // nullopt: `path` is in no table; true: a live file of its table (noted as
  // found); false: a file of a table that its latest version does not hold
  // (a removed version, the log itself).  `deleted`: a live file's deleted rows.
  std::optional<bool> Contains(const std::string& path,
                               std::shared_ptr<const DeletedRows>* deleted = nullptr,
                               std::shared_ptr<const ColumnMapping>* mapping = nullptr);
  // A NotFound error naming a live file that was not listed.
  arrow::Status CheckAllFound(const std::string& shown, const std::string& base) const;

 private:
  const std::vector<DeltaTable>& tables_;
  std::vector<std::vector<bool>> found_;
};

// The Delta table each explicitly named file lies in, if any (its nearest
// folder above with a log), each folder looked at once.
class DeltaLookup {
 public:
  DeltaLookup(arrow::fs::FileSystem& fs, double remote_timeout)
      : fs_(fs), remote_timeout_(remote_timeout) {}
  // Ok when `file` is in no table or is a live file of its table; else an
  // InvalidArgument error naming it (a removed version, or the log itself).
  // `deleted`: a live file's deleted rows.
  arrow::Status CheckLive(const std::string& file, const std::string& shown,
                          std::shared_ptr<const DeletedRows>* deleted = nullptr,
                          std::shared_ptr<const ColumnMapping>* mapping = nullptr);

 private:
  arrow::fs::FileSystem& fs_;
  double remote_timeout_;
  std::map<std::string, std::optional<DeltaTable>> tables_;  // folder -> its table (a log there)
};

// The replay of a log's actions (separate for tests).
class DeltaReplay {
 public:
  // Applies the rows of a checkpoint (a table with `add` and optionally
  // `protocol`, `metaData` and `sidecar` columns).
  arrow::Status ApplyCheckpoint(const arrow::Table& actions);
  // Applies one commit: its removes, then its adds.
  arrow::Status ApplyCommit(const arrow::Table& actions);
  // The live files, sorted, after checking what the table needs.  `table`
  // names the table in errors; `dvs`, when given, gets each file's deletion
  // vector (nullopt: none).
  arrow::Result<std::vector<std::string>> LiveFiles(
      const std::string& table,
      std::vector<std::optional<DeletionVectorDescriptor>>* dvs = nullptr) const;
  // The table's column mapping by name (null without one), from its schema.
  arrow::Result<std::shared_ptr<const ColumnMapping>> Mapping(const std::string& table) const;

 private:
  arrow::Status Apply(const arrow::Table& actions, bool commit);

  // Path as the log wrote it -> its deletion vector, if any.
  std::map<std::string, std::optional<DeletionVectorDescriptor>> live_;
  std::optional<int64_t> min_reader_version_;
  std::vector<std::string> reader_features_;
  std::string column_mapping_;
  std::string schema_string_;
  std::vector<std::string> partition_columns_;
  bool sidecars_ = false;
};

// The JSON schema of the actions a reader needs (fields not named are ignored).
std::shared_ptr<arrow::Schema> DeltaActionSchema();

// Parses one JSON commit (newline-delimited actions).
arrow::Result<std::shared_ptr<arrow::Table>> ParseDeltaCommit(const std::string& text);

}  // namespace shardfeed
