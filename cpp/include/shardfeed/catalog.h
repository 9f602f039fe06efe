// The catalog: a dataset's files and row groups, read from Parquet footers only.
//
// Files are ordered by their path relative to the dataset root, so the same
// files under another root (a local copy, a bucket) give the same catalog and
// the same fingerprint.  Zero-row files are skipped.
//
// Below a dataset folder, paths with a component that starts with '_' or '.'
// are not data (Spark's _temporary/ and _SUCCESS, .crc files); files without
// the .parquet extension are read when their magic bytes say Parquet.  Hive
// partition folders (key=value) become columns after the files' columns.
// Files may differ in their schemas as described in catalog/unify.h: the
// dataset schema is the promoted one, and each file maps onto it by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace parquet {
class FileMetaData;
}

namespace shardfeed {

// Rows [begin, end) of a file, counted from its first row (all row groups).
struct RowRun {
  int64_t begin = 0;
  int64_t end = 0;
};

// The rows of a file that a Delta Lake deletion vector deletes (catalog/deletion_vector.h).
struct DeletedRows {
  std::string id;            // the deletion vector's unique id (part of the fingerprint)
  std::vector<RowRun> runs;  // sorted, disjoint, not adjacent
  int64_t count = 0;         // rows in the runs
};

struct FileEntry {
  std::string path;      // path on `filesystem` (what OpenInputFile takes)
  std::string rel_path;  // path relative to the dataset root; decides the order
  int64_t size = 0;
  std::string version;   // modification time (ns) as text; empty when unknown
  std::string identity;  // local files: StatIdentity (device, inode, size, times)
  // The footer, read once, without its row groups (schema, key-value
  // metadata); each row group keeps its own part (RowGroupEntry::footer).
  std::shared_ptr<parquet::FileMetaData> metadata;
  // Dataset schema field -> this file's field, -1 when the file lacks the
  // column (it reads as null) or it is a partition column.  A file's fields
  // are its top-level columns with struct fields flattened (`user.age`).
  std::vector<int> field_map;
  // Only in a file with struct columns: the leaf columns of each of its
  // fields.  Empty otherwise, where field i is top-level column i.
  std::vector<std::vector<int>> struct_leaves;
  // One value per Catalog::partition_schema() field (a null scalar for
  // __HIVE_DEFAULT_PARTITION__); what filters on partitions prune by.
  std::vector<std::shared_ptr<arrow::Scalar>> partition_values;
  // A Delta table's file with a deletion vector: its deleted rows, which no
  // stream delivers (FilteredRows drops them); null for every other file.
  std::shared_ptr<const DeletedRows> deleted;
};

// What the dataset schema says about one column beyond its type.
struct ColumnOrigin {
  int partition_key = -1;               // index into Catalog::partition_schema(); -1: a file column
  std::vector<std::string> file_types;  // the distinct types in the files (promoted when > 1)
  int64_t missing_files = 0;            // files that lack the column (it reads as null there)
  std::string conflict;                 // non-empty: types with no common type
  std::string struct_origin;            // the struct it is a field of ('s' of 's.a'); "": none
};

enum class Partitioning {
  kNone,  // folder names are only paths
  kHive,  // key=value folders become columns
};

struct RowGroupEntry {
  int32_t file = 0;       // index into Catalog::files()
  int32_t row_group = 0;  // index inside the file
  int64_t num_rows = 0;
  int64_t first_row = 0;    // global id of its first row in the natural order
  int64_t total_bytes = 0;  // compressed size of its column chunks
  // The file's footer with this row group alone, Thrift-serialized: parsed
  // (RowGroupFooter) when it is read.  A parsed footer holds about 830 bytes
  // per column chunk and this about 90, and the catalog lives as long as the
  // loader: the whole footers of a large dataset grew its peak memory with
  // its size (bench_memory --dataset-rows).
  std::shared_ptr<const std::string> footer;
};

// RowGroupEntry::footer parsed: a footer whose row group 0 is `rg`.
arrow::Result<std::shared_ptr<parquet::FileMetaData>> RowGroupFooter(const RowGroupEntry& rg);

// A Delta Lake table among the sources, read at its latest version.
struct DeltaVersion {
  std::string table;  // its folder (a path of the filesystem)
  int64_t version = 0;
  int64_t files = 0;  // its live files read (below the source, when inside the table)
};

struct CatalogOptions {
  int num_threads = 8;  // footers read in parallel
  // Seconds each remote footer read may take before a StorageError names the
  // file; 0: no deadline.
  double remote_timeout = 60.0;
  Partitioning partitioning = Partitioning::kHive;
  // Non-empty: of the files the sources list, only these (paths relative to
  // the dataset root, as FileEntry::rel_path); each must still be there.  A
  // process that reopens a dataset (a DataLoader worker) reads the files its
  // parent read, not the ones added to a folder since.
  std::vector<std::string> only_files;
  // Folders (given as sources are) that the dataset root must contain: the
  // fixed parts of glob patterns expanded before the catalog saw them (a local
  // glob, in Python), so that the key=value folders between such a part and
  // the matches are partition columns, as a URI's glob makes them.
  std::vector<std::string> base_dirs;
  // Per source, when given: the glob it was expanded from (an id shared by that
  // glob's matches), -1 for a path named.  A folder a glob matched may hold no
  // data (an empty partition) as long as the glob as a whole finds a file; a
  // folder named must hold some.  (A URI's glob is expanded here, and known.)
  std::vector<int> source_globs;
};

class Catalog {
 public:
  // `sources`: one directory (every Parquet file below it), one file, or a
  // list of files (always read, whatever their names).  Local paths and URIs that Arrow's
  // filesystems know (file://, s3://, gs://, hdfs://) are accepted; a list must live on one
  // filesystem.
  static arrow::Result<std::shared_ptr<Catalog>> Open(const std::vector<std::string>& sources,
                                                      const CatalogOptions& options = {});

  const std::shared_ptr<arrow::fs::FileSystem>& filesystem() const { return fs_; }
  const std::string& root() const { return root_; }
  const std::vector<FileEntry>& files() const { return files_; }
  const std::vector<RowGroupEntry>& row_groups() const { return row_groups_; }
  // The dataset schema: file columns (promoted across files), then partition keys.
  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  // The Hive partition keys (int64 or string), also when a file column of the
  // same name shadows one of them in schema().
  const std::shared_ptr<arrow::Schema>& partition_schema() const { return partition_schema_; }
  // One entry per schema() field.
  const std::vector<ColumnOrigin>& column_origins() const { return origins_; }
  int64_t num_rows() const { return num_rows_; }
  // The Delta Lake tables whose live files were read (see catalog/delta_log.h).
  const std::vector<DeltaVersion>& delta_tables() const { return delta_tables_; }
  // Hex digest of (relative paths, row-group row counts, schema): what the
  // sample order depends on.  Stable across roots and machines.  Datasets whose
  // files all have one schema and no partitions keep the digest of earlier
  // versions; promoted types, partition keys and deletion vectors' ids are
  // added only when present.
  const std::string& fingerprint() const { return fingerprint_; }
  // Which storage the files live on, beyond their paths: the filesystem type,
  // the source URI's options (endpoint_override, ...) and, for S3, the
  // AWS_ENDPOINT_URL in effect.  Part of every cache key.
  const std::string& storage_id() const { return storage_id_; }
  bool is_local() const;
  // True when some file has deleted rows (FileEntry::deleted).
  bool has_deletions() const { return has_deletions_; }

  // Row counts of the row groups, in catalog order: the input of the plan.
  std::vector<int64_t> RowGroupRows() const;

 private:
  static arrow::Result<std::shared_ptr<Catalog>> OpenUnredacted(
      const std::vector<std::string>& sources, const CatalogOptions& options);

  friend struct CatalogBuilder;
  std::shared_ptr<arrow::fs::FileSystem> fs_;
  std::string root_;
  std::vector<FileEntry> files_;
  std::vector<RowGroupEntry> row_groups_;
  std::shared_ptr<arrow::Schema> schema_;
  std::shared_ptr<arrow::Schema> partition_schema_;
  std::vector<ColumnOrigin> origins_;
  int64_t num_rows_ = 0;
  std::string fingerprint_;
  std::string storage_id_;
  std::vector<DeltaVersion> delta_tables_;
  bool has_deletions_ = false;
};

// The identity of catalog file `file` for every cache (the file cache and the
// decoded tier): which storage (storage_id) and which path on it.
std::string CacheKey(const Catalog& catalog, int32_t file);

}  // namespace shardfeed
