#include "catalog/table_formats.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include <arrow/filesystem/path_util.h>

#include "catalog/discover.h"
#include "shardfeed/status.h"
#include "util/deadline_file.h"

namespace shardfeed {

namespace {

enum class Format { kIceberg, kHudi };

struct Table {
  std::string root;
  Format format;
  std::string marker;      // the file that gave it away, relative to the root
  bool partition = false;  // `root` is a partition folder of the table, not its root
};

bool IsIcebergMetadata(std::string_view name) {
  constexpr std::string_view kSuffix = ".metadata.json";
  return name.size() > kSuffix.size() && name.ends_with(kSuffix);
}

// The table `path` marks: <root>/metadata/*.metadata.json (Iceberg) or
// <root>/.hoodie/hoodie.properties (Hudi); or the Hudi partition folder it
// marks, <partition>/.hoodie_partition_metadata (a `.parquet` or `.orc` one
// too), which every Hudi writer puts in each partition folder.
std::optional<Table> TableOf(const std::string& path) {
  const auto [dir, name] = arrow::fs::internal::GetAbstractPathParent(path);
  if (!dir.empty() && name.starts_with(".hoodie_partition_metadata")) {
    return Table{dir, Format::kHudi, name, true};
  }
  const auto [root, folder] = arrow::fs::internal::GetAbstractPathParent(dir);
  if (root.empty()) return std::nullopt;
  if (folder == "metadata" && IsIcebergMetadata(name)) {
    return Table{root, Format::kIceberg, "metadata/" + name};
  }
  if (folder == ".hoodie" && name == "hoodie.properties") {
    return Table{root, Format::kHudi, ".hoodie/" + name};
  }
  return std::nullopt;
}

// `path` relative to `root` when below it.
std::optional<std::string> Below(const std::string& root, const std::string& path) {
  if (path.size() <= root.size() + 1 || path.compare(0, root.size(), root) != 0 ||
      path[root.size()] != '/') {
    return std::nullopt;
  }
  return path.substr(root.size() + 1);
}

std::string Where(const Table& t, const std::string& base, const std::string& shown) {
  if (t.root == base) return "'" + shown + "'";
  if (const auto rel = Below(base, t.root)) return "'" + shown + "/" + *rel + "'";
  return "the folder above it, '" + t.root + "',";
}

arrow::Status Refuse(const Table& t, const std::string& base, const std::string& shown,
                     const std::string& file) {
  const auto rel = Below(base, file);
  const std::string head = "source '" + shown + "': " + Where(t, base, shown);
  const std::string tail =
      " A glob or a list of files reads exactly the files it names, such as '" +
      (rel ? shown + "/" + *rel : file) + "' (every version, if that is what you want).";
  if (t.format == Format::kIceberg) {
    return Error(ErrorKind::kInvalidArgument,
                 head + " is an Apache Iceberg table (it has " + t.marker +
                     "): its folders keep the data files of older snapshots, rows since deleted "
                     "or rewritten, which only its metadata tells apart, and shardfeed reads "
                     "Delta tables but not Iceberg metadata. Pass the data files of the snapshot "
                     "to read, e.g. with pyiceberg: [task.file.file_path for task in "
                     "table.scan().plan_files()] (a snapshot with delete files must be written "
                     "out first)." +
                     tail);
  }
  return Error(ErrorKind::kInvalidArgument,
               head +
                   (t.partition ? " is a partition folder of an Apache Hudi table (it has "
                                : " is an Apache Hudi table (it has ") +
                   t.marker +
                   "): its folders keep several versions of each file group, which only its "
                   "timeline tells apart, and shardfeed does not read Hudi's timeline. Pass the "
                   "files of the snapshot to read, e.g. "
                   "spark.read.format(\"hudi\").load(path).inputFiles() for a copy-on-write "
                   "table (a merge-on-read table needs a compaction first)." +
                   tail);
}

// The name of an Iceberg metadata file in folder `dir` (not below it), if one
// is found within the timeout; a folder that cannot be listed has none.
std::optional<std::string> IcebergMetadataIn(arrow::fs::FileSystem& fs, const std::string& dir,
                                             double timeout) {
  arrow::fs::FileSelector selector;
  selector.base_dir = dir;
  selector.allow_not_found = true;
  selector.recursive = false;
  auto listing =
      fs.type_name() == "local" || timeout <= 0
          ? fs.GetFileInfo(selector)
          : CallBefore<std::vector<arrow::fs::FileInfo>>(
                [keep = fs.shared_from_this(), selector] { return keep->GetFileInfo(selector); },
                DeadlineAfter(timeout), timeout, nullptr);
  if (!listing.ok()) return std::nullopt;
  for (const auto& info : *listing) {
    auto name = arrow::fs::internal::GetAbstractPathParent(info.path()).second;
    if (info.IsFile() && IsIcebergMetadata(name)) return name;
  }
  return std::nullopt;
}

}  // namespace

arrow::Status CheckTableFormats(arrow::fs::FileSystem& fs, const std::string& base,
                                const std::vector<arrow::fs::FileInfo>& listed,
                                const std::vector<std::string>& delta_roots,
                                const std::string& shown, double remote_timeout) {
  std::vector<Table> tables;
  for (const auto& file : listed) {
    auto table = TableOf(file.path());
    if (!table || (table->root != base && !Below(base, table->root))) continue;
    if (std::find(delta_roots.begin(), delta_roots.end(), table->root) != delta_roots.end()) {
      continue;  // a Delta table with Iceberg metadata too (UniForm): its log decides
    }
    const bool known = std::any_of(tables.begin(), tables.end(),
                                   [&](const Table& t) { return t.root == table->root; });
    if (!known) tables.push_back(std::move(*table));
  }
  // An Iceberg table's data/ folder, or a partition folder below it, given on
  // its own: the table's metadata/ is beside a "data" folder above.
  for (std::string dir = base; tables.empty() && !dir.empty();) {
    auto [parent, name] = arrow::fs::internal::GetAbstractPathParent(dir);
    if (parent.empty() || parent == dir) break;
    if (name == "data") {
      const auto metadata = IcebergMetadataIn(fs, parent + "/metadata", remote_timeout);
      if (metadata) tables.push_back({parent, Format::kIceberg, "metadata/" + *metadata});
    }
    dir = std::move(parent);
  }
  for (const auto& file : listed) {
    for (const auto& t : tables) {
      const auto rel = Below(t.root, file.path());
      if (!rel || IsHiddenPath(*rel)) continue;  // .hoodie/, _SUCCESS, ...
      if (t.format == Format::kIceberg && rel->rfind("metadata/", 0) == 0) continue;
      return Refuse(t, base, shown, file.path());
    }
  }
  return arrow::Status::OK();
}

}  // namespace shardfeed
