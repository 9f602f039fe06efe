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
// A partitioned table's partition values are the log's (`add.partitionValues`),
// not its folder names: Databricks and delta-rs write the files of a table
// mapped by name (and of any with `delta.randomizeFilePrefixes`) under random
// prefixes ("5a/part-0.parquet"), where no folder names the partition.
//
// Refused, with an error naming the table and the reason (reading on would
// give other rows than the table holds): a reader protocol above 3, a reader
// feature not listed in delta_log.cc, column mapping by id, a deletion
// vector that cannot be read, a file path outside the table, a gap in the
// log, a live file missing from the folder (checked by the catalog).
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
#include "catalog/partition.h"

namespace shardfeed {

// One table: its folder and the files its latest version holds.
struct DeltaTable {
  std::string root;  // the table's folder (a path of the filesystem)
  // The same folder, on a local filesystem with links resolved: what tells two
  // namings of one table apart (`t`, and a link to it).
  std::string identity;
  std::string name;                // how errors name it
  int64_t version = -1;            // the log's latest version
  std::vector<std::string> files;  // live data files, relative to root, URL-decoded, sorted
  // Per file: its deletion vector (nullopt: none), and the rows it deletes once
  // read (null until then, and without one).
  std::vector<std::optional<DeletionVectorDescriptor>> dvs;
  std::vector<std::shared_ptr<const DeletedRows>> deleted;
  // Column mapping by name: its files' physical column names -> the table's.
  std::shared_ptr<const ColumnMapping> mapping;
  // Its primitive columns by its latest schema (DeltaReplay::Columns): what
  // the catalog adds where no file holds a column yet, or holds it narrower.
  std::shared_ptr<const arrow::FieldVector> columns;
  // Per file, a partitioned table's partition values from its log, keyed by
  // the columns' (display) names in the table's order; an empty value is null.
  // Empty for an unpartitioned table, and for one the source lies inside
  // (its partition folders are then read as any folders are).
  std::vector<PartitionPairs> partitions;
  // Whether the folders of its files are read as Hive partitions: only where
  // the source lies inside the table; else its log alone says its partitions
  // (an unpartitioned table's "k=1/" folders are no column of it).
  bool folders_are_partitions = false;
};

// What the catalog needs to know of one live file of a table.
struct DeltaFile {
  std::shared_ptr<const DeletedRows> deleted;         // its deleted rows (null: none)
  std::shared_ptr<const ColumnMapping> mapping;       // its table's mapping by name (null: none)
  std::optional<PartitionPairs> partitions;           // see DeltaTable::partitions
  size_t in_table_size = 0;                           // length of its path relative to the table
  std::string table;                                  // its table's identity ("": in no table)
  std::shared_ptr<const arrow::FieldVector> columns;  // see DeltaTable::columns
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
  // (a removed version, the log itself).  `file`: what a live file needs.
  std::optional<bool> Contains(const std::string& path, DeltaFile* file = nullptr);
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
  // `out`: what a live file needs (a file named alone has no partitions).
  arrow::Status CheckLive(const std::string& file, const std::string& shown,
                          DeltaFile* out = nullptr);

 private:
  arrow::fs::FileSystem& fs_;
  double remote_timeout_;
  std::map<std::string, std::optional<DeltaTable>> tables_;  // folder -> its table (a log there)
};

// The replay of a log's actions (separate for tests).
class DeltaReplay {
 public:
  // `root`: the table's folder, a path of its filesystem, against which a log
  // path given as an absolute URI is made relative ("" : none is);
  // `resolved`: on a local filesystem, the same folder with its symbolic
  // links resolved (a log names files by the path its writer saw).
  explicit DeltaReplay(std::string root = "", std::string resolved = "")
      : root_(std::move(root)), resolved_(std::move(resolved)) {}

  // Applies the rows of a checkpoint (a table with `add` and optionally
  // `protocol`, `metaData` and `sidecar` columns).  An `add` row's
  // `partitionValues` is a map (a checkpoint) or a struct (ParseDeltaCommit).
  arrow::Status ApplyCheckpoint(const arrow::Table& actions);
  // Applies one commit: its removes, then its adds.
  arrow::Status ApplyCommit(const arrow::Table& actions);
  // Parses (ParseDeltaCommit) and applies one commit, its adds' partition
  // values read under the keys of the metaData so far, or of its own.
  arrow::Status ApplyCommitText(const std::string& text, const std::string& table);
  // The live files, sorted, after checking what the table needs.  `table`
  // names the table in errors; `dvs`, when given, gets each file's deletion
  // vector (nullopt: none), `partitions` its partition values (none when the
  // table is not partitioned).
  arrow::Result<std::vector<std::string>> LiveFiles(
      const std::string& table, std::vector<std::optional<DeletionVectorDescriptor>>* dvs = nullptr,
      std::vector<PartitionPairs>* partitions = nullptr);
  // The keys of the partition values in `add` actions as the latest metaData
  // says: the partition columns, by their physical names under column mapping.
  arrow::Result<std::vector<std::string>> PartitionKeys(const std::string& table);
  // The table's column mapping by name (null without one), from its schema.
  arrow::Result<std::shared_ptr<const ColumnMapping>> Mapping(const std::string& table) const;
  // The table's primitive columns by its latest schema, partition columns
  // left out (PrimitiveColumns); none when the schema cannot be parsed.
  arrow::FieldVector Columns() const;

 private:
  arrow::Status Apply(const arrow::Table& actions, bool commit);

  struct Add {
    std::optional<DeletionVectorDescriptor> dv;
    std::map<std::string, std::optional<std::string>> partition_values;  // key -> value
  };
  // The key of a logged path in live_: URL-decoded and relative to the table
  // (an add and a remove may spell one file either way), or, for a path that
  // is no path inside the table, kOutside and the path as logged.
  std::string Key(const std::string& logged) const;
  static constexpr char kOutside = '\0';

  std::string root_;
  std::string resolved_;
  // Key (above) -> its deletion vector and partition values.
  std::map<std::string, Add> live_;
  std::optional<int64_t> min_reader_version_;
  std::vector<std::string> reader_features_;
  std::string column_mapping_;
  std::string schema_string_;
  std::vector<std::string> partition_columns_;
  bool sidecars_ = false;
  bool keys_stale_ = true;  // partition_keys_ predates the latest metaData
  std::vector<std::string> partition_keys_;
};

// The JSON schema of the actions a reader needs (fields not named are ignored),
// with `add.partitionValues` a struct of `partition_keys` when there are any.
std::shared_ptr<arrow::Schema> DeltaActionSchema(
    const std::vector<std::string>& partition_keys = {});

// Parses one JSON commit (newline-delimited actions).
arrow::Result<std::shared_ptr<arrow::Table>> ParseDeltaCommit(
    const std::string& text, const std::vector<std::string>& partition_keys = {});

}  // namespace shardfeed
