#include "catalog/delta_log.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/json/options.h>
#include <arrow/json/reader.h>
#include <parquet/arrow/reader.h>

#include "catalog/discover.h"
#include "catalog/partition.h"
#include "shardfeed/status.h"
#include "util/deadline_file.h"

namespace shardfeed {
namespace {

constexpr std::string_view kLogDir = "/_delta_log/";
constexpr int64_t kMaxReaderVersion = 3;

// Reader features whose tables read correctly here: those that change only
// how files are written or named, and those checked below (columnMapping:
// modes "none" and "name" (column_mapping.h); deletionVectors: applied
// (deletion_vector.h); v2Checkpoint:
// classic checkpoints without sidecars only).
constexpr std::string_view kReaderFeatures[] = {
    "columnMapping",       "deletionVectors",      "timestampNtz",
    "typeWidening",        "typeWidening-preview", "v2Checkpoint",
    "vacuumProtocolCheck", "variantType",          "variantType-preview",
};

std::string Named(const std::string& table) { return "Delta table '" + table + "'"; }

// A log file's version from its 20-digit name prefix, or -1.
int64_t VersionOf(std::string_view name) {
  if (name.size() < 21 || name[20] != '.') return -1;
  int64_t version = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + 20, version);
  // (The largest is refused: one past it must be a version too.)
  if (ec != std::errc() || end != name.data() + 20 || version < 0 ||
      version == std::numeric_limits<int64_t>::max()) {
    return -1;
  }
  return version;
}

// "0000000001.0000000003.parquet" -> (1, 3); (1, 1) for "parquet"; nullopt otherwise.
std::optional<std::pair<int, int>> CheckpointPart(std::string_view rest) {
  if (rest == "parquet") return std::pair{1, 1};
  if (rest.size() != 10 + 1 + 10 + 8 || rest[10] != '.' || rest.substr(21) != ".parquet") {
    return std::nullopt;
  }
  int part = 0, parts = 0;
  const auto a = std::from_chars(rest.data(), rest.data() + 10, part);
  const auto b = std::from_chars(rest.data() + 11, rest.data() + 21, parts);
  if (a.ec != std::errc() || a.ptr != rest.data() + 10 || b.ec != std::errc() ||
      b.ptr != rest.data() + 21 || part < 1 || parts < 1 || part > parts) {
    return std::nullopt;
  }
  return std::pair{part, parts};
}

struct LogFiles {
  std::map<int64_t, arrow::fs::FileInfo> commits;
  // version -> parts -> part -> file
  std::map<int64_t, std::map<int, std::map<int, arrow::fs::FileInfo>>> checkpoints;
  bool any = false;
};

arrow::Result<std::shared_ptr<arrow::Buffer>> ReadWhole(arrow::fs::FileSystem& fs,
                                                        const arrow::fs::FileInfo& info,
                                                        double remote_timeout) {
  ARROW_ASSIGN_OR_RAISE(auto file, fs.OpenInputFile(info));
  if (fs.type_name() != "local") file = WithDeadline(file, remote_timeout);
  ARROW_ASSIGN_OR_RAISE(const int64_t size, file->GetSize());
  return file->ReadAt(0, size);
}

arrow::Result<std::shared_ptr<arrow::Table>> ReadCheckpointPart(arrow::fs::FileSystem& fs,
                                                                const arrow::fs::FileInfo& info,
                                                                double remote_timeout) {
  ARROW_ASSIGN_OR_RAISE(auto file, fs.OpenInputFile(info));
  if (fs.type_name() != "local") file = WithDeadline(file, remote_timeout);
  ARROW_ASSIGN_OR_RAISE(auto reader, parquet::arrow::OpenFile(file, arrow::default_memory_pool()));
  std::shared_ptr<arrow::Schema> schema;
  ARROW_RETURN_NOT_OK(reader->GetSchema(&schema));
  arrow::FieldVector fields;
  arrow::ChunkedArrayVector columns;
  for (const char* name : {"add", "protocol", "metaData", "sidecar"}) {
    const int i = schema->GetFieldIndex(name);
    if (i < 0) continue;
    std::shared_ptr<arrow::ChunkedArray> column;
    ARROW_RETURN_NOT_OK(reader->ReadColumn(i, &column));
    fields.push_back(schema->field(i));
    columns.push_back(std::move(column));
  }
  return arrow::Table::Make(arrow::schema(std::move(fields)), std::move(columns));
}

// The struct column `name` of `table`, chunk by chunk (empty when absent).
std::vector<std::shared_ptr<arrow::StructArray>> StructChunks(const arrow::Table& table,
                                                              const char* name) {
  std::vector<std::shared_ptr<arrow::StructArray>> out;
  const auto column = table.GetColumnByName(name);
  if (!column || column->type()->id() != arrow::Type::STRUCT) return out;
  for (const auto& chunk : column->chunks()) {
    out.push_back(std::static_pointer_cast<arrow::StructArray>(chunk));
  }
  return out;
}

// Row i of a string child (nullopt when null or not a string).
std::optional<std::string> StringAt(const std::shared_ptr<arrow::Array>& array, int64_t i) {
  if (!array || array->IsNull(i)) return std::nullopt;
  if (array->type_id() == arrow::Type::STRING) {
    return std::string(static_cast<const arrow::StringArray&>(*array).GetView(i));
  }
  if (array->type_id() == arrow::Type::LARGE_STRING) {
    return std::string(static_cast<const arrow::LargeStringArray&>(*array).GetView(i));
  }
  return std::nullopt;
}

std::optional<int64_t> IntegerAt(const std::shared_ptr<arrow::Array>& array, int64_t i) {
  if (!array || array->IsNull(i)) return std::nullopt;
  if (array->type_id() == arrow::Type::INT32) {
    return static_cast<const arrow::Int32Array&>(*array).Value(i);
  }
  if (array->type_id() == arrow::Type::INT64) {
    return static_cast<const arrow::Int64Array&>(*array).Value(i);
  }
  return std::nullopt;
}

std::vector<std::string> StringsAt(const std::shared_ptr<arrow::Array>& array, int64_t i) {
  std::vector<std::string> out;
  if (!array || array->IsNull(i) || array->type_id() != arrow::Type::LIST) return out;
  const auto& list = static_cast<const arrow::ListArray&>(*array);
  const auto values = list.value_slice(i);
  for (int64_t j = 0; j < values->length(); ++j) {
    if (auto s = StringAt(values, j)) out.push_back(std::move(*s));
  }
  return out;
}

// The column mapping mode in a metaData row's configuration: a struct in a
// JSON commit (see DeltaActionSchema), a map<string, string> in a checkpoint.
std::string ColumnMappingAt(const std::shared_ptr<arrow::Array>& configuration, int64_t i) {
  constexpr char kKey[] = "delta.columnMapping.mode";
  if (!configuration || configuration->IsNull(i)) return "";
  if (configuration->type_id() == arrow::Type::STRUCT) {
    const auto& s = static_cast<const arrow::StructArray&>(*configuration);
    return StringAt(s.GetFieldByName(kKey), i).value_or("");
  }
  if (configuration->type_id() == arrow::Type::MAP) {
    const auto& map = static_cast<const arrow::MapArray&>(*configuration);
    const auto keys = map.keys();
    const auto items = map.items();
    for (int64_t j = map.value_offset(i); j < map.value_offset(i) + map.value_length(i); ++j) {
      if (StringAt(keys, j) == kKey) return StringAt(items, j).value_or("");
    }
  }
  return "";
}

// Row i's partition values: a struct of the keys asked for (a JSON commit,
// see DeltaActionSchema) or a map<string, string> (a checkpoint).
std::map<std::string, std::optional<std::string>> PartitionValuesAt(
    const std::shared_ptr<arrow::Array>& array, int64_t i) {
  std::map<std::string, std::optional<std::string>> out;
  if (!array || array->IsNull(i)) return out;
  if (array->type_id() == arrow::Type::STRUCT) {
    const auto& s = static_cast<const arrow::StructArray&>(*array);
    for (int k = 0; k < s.num_fields(); ++k) {
      out[s.struct_type()->field(k)->name()] = StringAt(s.field(k), i);
    }
  } else if (array->type_id() == arrow::Type::MAP) {
    const auto& map = static_cast<const arrow::MapArray&>(*array);
    const auto keys = map.keys();
    const auto items = map.items();
    for (int64_t j = map.value_offset(i); j < map.value_offset(i) + map.value_length(i); ++j) {
      if (auto key = StringAt(keys, j)) out[*key] = StringAt(items, j);
    }
  }
  return out;
}

// Row i's deletion vector (nullopt when null); checked when it is read, since
// a later commit may remove its file.
std::optional<DeletionVectorDescriptor> DescriptorAt(const std::shared_ptr<arrow::Array>& array,
                                                     int64_t i) {
  if (!array || array->IsNull(i) || array->type_id() != arrow::Type::STRUCT) return std::nullopt;
  const auto& dv = static_cast<const arrow::StructArray&>(*array);
  DeletionVectorDescriptor out;
  out.storage_type = StringAt(dv.GetFieldByName("storageType"), i).value_or("");
  out.path_or_inline = StringAt(dv.GetFieldByName("pathOrInlineDv"), i).value_or("");
  out.offset = IntegerAt(dv.GetFieldByName("offset"), i);
  out.size_in_bytes = IntegerAt(dv.GetFieldByName("sizeInBytes"), i).value_or(-1);
  out.cardinality = IntegerAt(dv.GetFieldByName("cardinality"), i).value_or(-1);
  return out;
}

// A log path is a URI: mostly relative and URL-escaped
// ("part=a/x%20y.parquet"), but the protocol lets it be absolute
// ("s3://bucket/table/x.parquet", "file:/data/table/x.parquet", "file:///..."),
// as removes written by some engines are.  The file's path relative to the
// table `root` (URL-decoded), or nullopt for one outside it (a shallow clone's
// files) or with "..", "." or empty components.
std::optional<std::string> TablePath(const std::string& root, const std::string& resolved,
                                     const std::string& logged) {
  std::string rest = logged;
  bool absolute = false;
  // A scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.') and a
  // path from the root: "2024-01-01T10:00:00.parquet" or "a:b.parquet" are
  // relative paths with a colon.
  const size_t colon = rest.find(':');
  if (colon != std::string::npos && colon > 0 && colon < rest.find('/') &&
      std::isalpha(static_cast<unsigned char>(rest[0])) && rest.compare(colon + 1, 1, "/") == 0) {
    const bool scheme =
        std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
        });
    if (scheme) {
      absolute = true;
      std::string name = rest.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool file = name == "file";
      rest.erase(0, colon + 1);
      if (rest.starts_with("//")) {
        rest.erase(0, 2);  // an authority: "" (file:///x), a bucket, or the local host
        if (file && rest.starts_with("localhost/")) rest.erase(0, 9);
      }
    }
  }
  std::string path = UrlDecode(rest);
  if (absolute || path.starts_with('/')) {
    // file:///data/t/x gives "/data/t/x", s3://bucket/t/x "bucket/t/x": as the
    // filesystem's paths of local and S3 tables are.
    const auto below = [&](std::string base,
                           const std::string& full) -> std::optional<std::string> {
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      if (base.empty() || !full.starts_with(base + '/')) return std::nullopt;
      return full.substr(base.size() + 1);
    };
    auto inside = below(root, path);
    if (!inside && !resolved.empty() && path.starts_with('/')) {
      // Through a symbolic link on either side: the path's existing folders resolved.
      std::error_code error;
      const auto real = std::filesystem::weakly_canonical(path, error);
      if (!error) inside = below(resolved, real.string());
    }
    if (!inside) return std::nullopt;
    path = *std::move(inside);
  }
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part(path.data() + start, slash - start);
    if (part == ".." || part == "." || part.empty()) return std::nullopt;
    start = slash + 1;
  }
  return path;
}

arrow::Result<LogFiles> FindLogFiles(const std::string& root,
                                     const std::vector<const arrow::fs::FileInfo*>& files) {
  LogFiles log;
  for (const auto* info : files) {
    const std::string_view name =
        std::string_view(info->path()).substr(root.size() + kLogDir.size());
    if (name.find('/') != std::string_view::npos) continue;  // _sidecars/, _staged_commits/
    log.any = true;
    const int64_t version = VersionOf(name);
    if (version < 0) continue;  // _last_checkpoint, .crc, ...
    const std::string_view rest = name.substr(21);
    if (rest == "json") {
      log.commits.emplace(version, *info);
    } else if (rest.substr(0, 11) == "checkpoint.") {
      if (auto part = CheckpointPart(rest.substr(11))) {
        log.checkpoints[version][part->second][part->first] = *info;
      }  // else a V2 checkpoint named by a UUID: classic ones and commits are used
    }
  }
  return log;
}

// The table replayed from checkpoint `checkpoint` (its `parts`; -1 and null: none)
// and every commit after it.
arrow::Result<DeltaTable> ReplayFrom(arrow::fs::FileSystem& fs, const std::string& root,
                                     const LogFiles& log, const std::string& shown,
                                     double remote_timeout, int64_t checkpoint,
                                     const std::map<int, arrow::fs::FileInfo>* parts,
                                     int64_t latest, bool* checkpoint_failed) {
  DeltaTable table;
  table.root = root;
  std::string resolved;
  if (fs.type_name() == "local") {
    std::error_code error;
    const auto real = std::filesystem::weakly_canonical(root, error);
    if (!error) resolved = real.string();
  }
  DeltaReplay replay(root, resolved);
  const auto context = [&](const arrow::fs::FileInfo& info) {
    return Named(shown) + ", log file '" + info.base_name() + "'";
  };
  if (parts) {
    for (const auto& [_, info] : *parts) {
      auto actions = ReadCheckpointPart(fs, info, remote_timeout);
      arrow::Status st = actions.status();
      if (st.ok()) st = replay.ApplyCheckpoint(**actions);
      if (!st.ok()) {
        *checkpoint_failed = true;
        return WithContext(st, context(info));
      }
    }
  }
  for (auto it = log.commits.upper_bound(checkpoint); it != log.commits.end(); ++it) {
    auto bytes = ReadWhole(fs, it->second, remote_timeout);
    if (!bytes.ok()) return WithContext(bytes.status(), context(it->second));
    ARROW_RETURN_NOT_OK(
        WithContext(replay.ApplyCommitText((*bytes)->ToString(), shown), context(it->second)));
  }
  ARROW_ASSIGN_OR_RAISE(table.files, replay.LiveFiles(shown, &table.dvs, &table.partitions));
  ARROW_ASSIGN_OR_RAISE(table.mapping, replay.Mapping(shown));
  table.columns = std::make_shared<const arrow::FieldVector>(replay.Columns());
  table.identity = resolved.empty() ? table.root : resolved;
  table.version = latest;
  table.name = shown;
  table.deleted.resize(table.files.size());
  return table;
}

arrow::Result<DeltaTable> ReadTable(arrow::fs::FileSystem& fs, const std::string& root,
                                    const LogFiles& log, const std::string& shown,
                                    double remote_timeout) {
  // The complete checkpoints, newest first, then none (the commits from 0).
  std::vector<std::pair<int64_t, const std::map<int, arrow::fs::FileInfo>*>> candidates;
  for (auto it = log.checkpoints.rbegin(); it != log.checkpoints.rend(); ++it) {
    for (const auto& [count, found] : it->second) {
      if (static_cast<int>(found.size()) == count) {
        candidates.emplace_back(it->first, &found);
        break;
      }
    }
  }
  candidates.emplace_back(-1, nullptr);
  const int64_t newest = candidates.front().first;
  const int64_t latest =
      std::max(newest, log.commits.empty() ? int64_t{-1} : log.commits.rbegin()->first);
  if (latest < 0) {
    return Error(ErrorKind::kInvalidData, Named(shown) +
                                              ": its _delta_log/ holds no commit "
                                              "and no complete checkpoint");
  }
  // The newest checkpoint that reads, with every commit after it (a loop over the
  // commits found, not over version numbers a file name could make huge): one that
  // does not read (a 0-byte file a full disk left) gives way to an older one, as
  // Delta's readers do, when the commits since that one are all there.
  arrow::Status first_failure;
  for (const auto& [checkpoint, parts] : candidates) {
    int64_t v = checkpoint + 1;
    std::optional<int64_t> missing;
    for (auto it = log.commits.upper_bound(checkpoint); it != log.commits.end(); ++it, ++v) {
      if (it->first != v) {
        missing = v;
        break;
      }
    }
    if (!missing && v - 1 != latest) missing = v;  // (no checkpoint, and no commit 0)
    if (missing) {
      if (!first_failure.ok()) return first_failure;
      return Error(ErrorKind::kInvalidData,
                   Named(shown) + ": its log has no commit " + std::to_string(*missing) +
                       (checkpoint < 0 ? " and no checkpoint"
                                       : " after its checkpoint " + std::to_string(checkpoint)) +
                       ", so version " + std::to_string(latest) + " cannot be rebuilt");
    }
    bool checkpoint_failed = false;
    auto table = ReplayFrom(fs, root, log, shown, remote_timeout, checkpoint, parts, latest,
                            &checkpoint_failed);
    if (table.ok() || !checkpoint_failed) return table;
    if (first_failure.ok()) first_failure = table.status();
  }
  return first_failure;
}

// Reads the deletion vectors of `table`'s files not read yet (all, or file
// `only` alone).  A `.bin` file holds the vectors of one DELETE's files: each
// is opened once, and several are read at once (one request each, mostly).
arrow::Status ReadDeletions(arrow::fs::FileSystem& fs, double remote_timeout, DeltaTable* table,
                            std::optional<size_t> only = std::nullopt) {
  std::map<std::string, std::vector<size_t>> by_file;  // "" for inline vectors
  for (size_t f = 0; f < table->files.size(); ++f) {
    if (!table->dvs[f] || table->deleted[f] || (only && f != *only)) continue;
    std::string key;
    if (table->dvs[f]->storage_type != "i") {
      auto path = DeletionVectorFile(fs, table->root, *table->dvs[f]);
      if (path.ok()) {
        key = *path;
      } else {  // its own group (Read reports the error)
        key = "\n";
        key += std::to_string(f);
      }
    }
    by_file[key].push_back(f);
  }
  std::vector<const std::vector<size_t>*> groups;
  for (const auto& [_, files] : by_file) groups.push_back(&files);
  std::vector<arrow::Status> errors(table->files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t g = next++; g < groups.size(); g = next++) {
      DeletionVectorReader reader(fs, table->root, remote_timeout);
      for (size_t f : *groups[g]) {
        auto rows = reader.Read(*table->dvs[f]);
        if (!rows.ok()) {
          errors[f] = rows.status();
          break;
        }
        table->deleted[f] = std::move(*rows);  // (each thread its own files)
      }
    }
  };
  constexpr size_t kReadsAtOnce = 8;
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(groups.size(), kReadsAtOnce); ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  for (size_t f = 0; f < errors.size(); ++f) {  // the first in file order
    if (!errors[f].ok()) {
      return WithContext(errors[f], Named(table->name) + ", file '" + table->files[f] + "'");
    }
  }
  return arrow::Status::OK();
}

// The files of `dir`'s `_delta_log/` (none when it has none, or cannot be listed).
std::vector<arrow::fs::FileInfo> LogListing(arrow::fs::FileSystem& fs, const std::string& dir,
                                            double remote_timeout) {
  arrow::fs::FileSelector selector;
  selector.base_dir = dir + "/_delta_log";
  selector.allow_not_found = true;
  arrow::Result<std::vector<arrow::fs::FileInfo>> infos;
  if (fs.type_name() == "local" || remote_timeout <= 0) {
    infos = fs.GetFileInfo(selector);
  } else {
    infos = CallBefore<std::vector<arrow::fs::FileInfo>>(
        [keep = fs.shared_from_this(), selector] { return keep->GetFileInfo(selector); },
        DeadlineAfter(remote_timeout), remote_timeout, nullptr);
  }
  return infos.ok() ? std::move(*infos) : std::vector<arrow::fs::FileInfo>{};
}

// The table whose folder is `dir`, or nullopt when `dir` holds no log.
arrow::Result<std::optional<DeltaTable>> TableAt(arrow::fs::FileSystem& fs, const std::string& dir,
                                                 double remote_timeout) {
  const auto infos = LogListing(fs, dir, remote_timeout);
  std::vector<const arrow::fs::FileInfo*> files;
  for (const auto& info : infos) {
    if (info.IsFile()) files.push_back(&info);
  }
  ARROW_ASSIGN_OR_RAISE(auto log, FindLogFiles(dir, files));
  if (!log.any) return std::nullopt;
  return ReadTable(fs, dir, log, dir, remote_timeout);
}

// `path` without its last component; false at the top ("bucket", "/x").
bool ToParent(std::string* path) {
  const size_t slash = path->rfind('/');
  if (slash == std::string::npos || slash == 0) return false;
  path->resize(slash);
  return true;
}

// The table a source folder lies inside (one partition of it): the nearest
// folder above `base` with a log.  Only its live files below `base` are kept.
arrow::Result<std::optional<DeltaTable>> EnclosingTable(arrow::fs::FileSystem& fs,
                                                        const std::string& base,
                                                        double remote_timeout) {
  std::string dir = base;
  while (ToParent(&dir)) {
    ARROW_ASSIGN_OR_RAISE(auto table, TableAt(fs, dir, remote_timeout));
    if (!table) continue;
    const std::string below = base.substr(dir.size() + 1) + "/";
    size_t kept = 0;
    for (size_t f = 0; f < table->files.size(); ++f) {
      if (!table->files[f].starts_with(below)) continue;
      if (kept != f) {  // (a self-move would empty the string)
        table->files[kept] = std::move(table->files[f]);
        table->dvs[kept] = std::move(table->dvs[f]);
      }
      ++kept;
    }
    table->files.resize(kept);
    table->dvs.resize(kept);
    table->deleted.resize(kept);
    // The source is a folder inside the table: its folders are read as any are.
    table->partitions.clear();
    table->folders_are_partitions = true;
    return table;
  }
  return std::nullopt;
}

}  // namespace

std::shared_ptr<arrow::Schema> DeltaActionSchema(const std::vector<std::string>& partition_keys) {
  const auto text = arrow::utf8();
  arrow::FieldVector add = {arrow::field("path", text)};
  if (!partition_keys.empty()) {
    arrow::FieldVector keys;
    for (const auto& key : partition_keys) keys.push_back(arrow::field(key, text));
    add.push_back(arrow::field("partitionValues", arrow::struct_(std::move(keys))));
  }
  add.push_back(arrow::field("deletionVector", arrow::struct_({
                                                   arrow::field("storageType", text),
                                                   arrow::field("pathOrInlineDv", text),
                                                   arrow::field("offset", arrow::int64()),
                                                   arrow::field("sizeInBytes", arrow::int64()),
                                                   arrow::field("cardinality", arrow::int64()),
                                               })));
  return arrow::schema({
      arrow::field("add", arrow::struct_(std::move(add))),
      arrow::field("remove", arrow::struct_({arrow::field("path", text)})),
      arrow::field("protocol", arrow::struct_({arrow::field("minReaderVersion", arrow::int64()),
                                               arrow::field("readerFeatures", arrow::list(text))})),
      arrow::field(
          "metaData",
          arrow::struct_({arrow::field("schemaString", text),
                          arrow::field("partitionColumns", arrow::list(text)),
                          arrow::field("configuration", arrow::struct_({arrow::field(
                                                            "delta.columnMapping.mode", text)}))})),
  });
}

arrow::Result<std::shared_ptr<arrow::Table>> ParseDeltaCommit(
    const std::string& text, const std::vector<std::string>& partition_keys) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error(ErrorKind::kInvalidData, "an empty commit (a commit is written whole)");
  }
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    return Error(ErrorKind::kInvalidData,
                 "not a commit of JSON actions: binary data (a NUL byte "
                 "at offset " +
                     std::to_string(nul) + ")");
  }
  // Every line an object, checked before Arrow parses: its reader crashes on a
  // text whose first value is not one (`null`: a read through a null pointer).
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const size_t first = text.find_first_not_of(" \t\r", start);
    if (first < end && text[first] != '{') {
      return Error(ErrorKind::kInvalidData,
                   "not a commit of JSON actions: a line that is not a JSON object (at byte " +
                       std::to_string(first) + ")");
    }
    start = end + 1;
  }
  auto read_options = arrow::json::ReadOptions::Defaults();
  read_options.use_threads = false;
  // One block: an action is one line, however long (a wide table's schema).
  read_options.block_size =
      static_cast<int32_t>(std::min<size_t>(text.size() + 1, std::numeric_limits<int32_t>::max()));
  auto parse_options = arrow::json::ParseOptions::Defaults();
  parse_options.explicit_schema = DeltaActionSchema(partition_keys);
  parse_options.unexpected_field_behavior = arrow::json::UnexpectedFieldBehavior::Ignore;
  auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(text));
  ARROW_ASSIGN_OR_RAISE(
      auto reader, arrow::json::TableReader::Make(arrow::default_memory_pool(), input, read_options,
                                                  parse_options));
  auto table = reader->Read();
  if (!table.ok()) {
    return Error(ErrorKind::kInvalidData,
                 "not a commit of newline-delimited JSON actions: " + table.status().message());
  }
  return table;
}

arrow::Status DeltaReplay::ApplyCheckpoint(const arrow::Table& actions) {
  return Apply(actions, false);
}

arrow::Status DeltaReplay::ApplyCommit(const arrow::Table& actions) { return Apply(actions, true); }

arrow::Status DeltaReplay::ApplyCommitText(const std::string& text, const std::string& table) {
  // A commit whose own metaData changes the keys is read again: applying a
  // commit twice gives what applying it once does.
  ARROW_ASSIGN_OR_RAISE(auto keys, PartitionKeys(table));
  ARROW_ASSIGN_OR_RAISE(auto actions, ParseDeltaCommit(text, keys));
  ARROW_RETURN_NOT_OK(ApplyCommit(*actions));
  ARROW_ASSIGN_OR_RAISE(auto now, PartitionKeys(table));
  if (now == keys) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(actions, ParseDeltaCommit(text, now));
  return ApplyCommit(*actions);  // (its metaData, and so the keys, the same again)
}

std::string DeltaReplay::Key(const std::string& logged) const {
  if (auto path = TablePath(root_, resolved_, logged)) return *std::move(path);
  return std::string(1, kOutside).append(logged);
}

arrow::Status DeltaReplay::Apply(const arrow::Table& actions, bool commit) {
  // A commit's removes first: one that removes and re-adds a path (a new
  // deletion vector) leaves it live.  A checkpoint's removes are tombstones of
  // files already gone from its adds.
  if (commit) {
    for (const auto& chunk : StructChunks(actions, "remove")) {
      const auto path = chunk->GetFieldByName("path");
      for (int64_t i = 0; i < chunk->length(); ++i) {
        if (chunk->IsNull(i)) continue;
        auto p = StringAt(path, i);
        if (!p) return Error(ErrorKind::kInvalidData, "a remove action without a path");
        live_.erase(Key(*p));
      }
    }
  }
  for (const auto& chunk : StructChunks(actions, "add")) {
    const auto path = chunk->GetFieldByName("path");
    const auto dv = chunk->GetFieldByName("deletionVector");
    const auto values = chunk->GetFieldByName("partitionValues");
    for (int64_t i = 0; i < chunk->length(); ++i) {
      if (chunk->IsNull(i)) continue;
      auto p = StringAt(path, i);
      if (!p) return Error(ErrorKind::kInvalidData, "an add action without a path");
      live_[Key(*p)] = {DescriptorAt(dv, i), PartitionValuesAt(values, i)};
    }
  }
  for (const auto& chunk : StructChunks(actions, "protocol")) {
    const auto version = chunk->GetFieldByName("minReaderVersion");
    const auto features = chunk->GetFieldByName("readerFeatures");
    for (int64_t i = 0; i < chunk->length(); ++i) {
      if (chunk->IsNull(i)) continue;
      min_reader_version_ = IntegerAt(version, i);
      reader_features_ = StringsAt(features, i);
    }
  }
  for (const auto& chunk : StructChunks(actions, "metaData")) {
    const auto configuration = chunk->GetFieldByName("configuration");
    for (int64_t i = 0; i < chunk->length(); ++i) {
      if (chunk->IsNull(i)) continue;
      column_mapping_ = ColumnMappingAt(configuration, i);
      schema_string_ = StringAt(chunk->GetFieldByName("schemaString"), i).value_or("");
      partition_columns_ = StringsAt(chunk->GetFieldByName("partitionColumns"), i);
      keys_stale_ = true;
    }
  }
  for (const auto& chunk : StructChunks(actions, "sidecar")) {
    sidecars_ = sidecars_ || chunk->null_count() < chunk->length();
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<std::string>> DeltaReplay::PartitionKeys(const std::string& table) {
  if (!keys_stale_) return partition_keys_;
  std::vector<std::string> keys = partition_columns_;
  if (column_mapping_ == "name" && !keys.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto mapping, Mapping(table));
    for (auto& key : keys) {
      const auto physical = std::find_if(
          mapping->top_level.begin(), mapping->top_level.end(), [&](const std::string& p) {
            const auto display = mapping->display.find(p);
            return display != mapping->display.end() && display->second == key;
          });
      if (physical == mapping->top_level.end()) {
        return Error(ErrorKind::kInvalidData, Named(table) + ": its partition column '" + key +
                                                  "' is not a column of its schema");
      }
      key = *physical;
    }
  }
  partition_keys_ = std::move(keys);
  keys_stale_ = false;
  return partition_keys_;
}

arrow::Result<std::vector<std::string>> DeltaReplay::LiveFiles(
    const std::string& table, std::vector<std::optional<DeletionVectorDescriptor>>* dvs,
    std::vector<PartitionPairs>* partitions) {
  const auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidData, Named(table) + ": " + why);
  };
  if (!min_reader_version_) return refuse("its log has no protocol action");
  if (*min_reader_version_ > kMaxReaderVersion) {
    return refuse("its reader protocol is version " + std::to_string(*min_reader_version_) +
                  "; tables up to version 3 are read");
  }
  for (const auto& feature : reader_features_) {
    if (std::find(std::begin(kReaderFeatures), std::end(kReaderFeatures), feature) ==
        std::end(kReaderFeatures)) {
      return refuse("it needs the reader feature '" + feature +
                    "', which this loader does not implement");
    }
  }
  if (!column_mapping_.empty() && column_mapping_ != "none" && column_mapping_ != "name") {
    return refuse("its columns are mapped by " + column_mapping_ +
                  " (delta.columnMapping.mode): the Parquet files' columns are found by field "
                  "ids, which this loader does not read; tables mapped by name are read");
  }
  if (sidecars_) {
    return refuse("its checkpoint keeps its files in sidecars (a V2 checkpoint), not read here");
  }
  ARROW_ASSIGN_OR_RAISE(const auto keys, PartitionKeys(table));
  std::vector<std::pair<std::string, const Add*>> files;
  files.reserve(live_.size());
  for (const auto& [key, add] : live_) {
    if (!key.empty() && key.front() == kOutside) {
      return Error(ErrorKind::kInvalidData,
                   Named(table) + ": its log names the data file '" + key.substr(1) +
                       "', which is not a path inside the table (a shallow clone?); "
                       "only tables whose files lie in their own folder are read");
    }
    files.emplace_back(key, &add);
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> paths;
  paths.reserve(files.size());
  if (dvs) dvs->clear();
  if (partitions) partitions->clear();
  for (auto& [path, add] : files) {
    if (dvs) dvs->push_back(add->dv);
    if (partitions && !keys.empty()) {
      // A key the action lacks is null, and so is an empty value (Delta writes
      // a null as either; Spark reads both as null).
      PartitionPairs pairs;
      for (size_t k = 0; k < keys.size(); ++k) {
        const auto found = add->partition_values.find(keys[k]);
        std::optional<std::string> value;
        if (found != add->partition_values.end() && found->second && !found->second->empty()) {
          value = found->second;
        }
        pairs.emplace_back(partition_columns_[k], std::move(value));
      }
      partitions->push_back(std::move(pairs));
    }
    paths.push_back(std::move(path));
  }
  return paths;
}

arrow::Result<std::shared_ptr<const ColumnMapping>> DeltaReplay::Mapping(
    const std::string& table) const {
  if (column_mapping_ != "name") return nullptr;
  auto mapping = ParseColumnMapping(schema_string_);
  if (!mapping.ok()) return WithContext(mapping.status(), Named(table));
  return std::make_shared<const ColumnMapping>(std::move(*mapping));
}

arrow::FieldVector DeltaReplay::Columns() const {
  // A schema this cannot parse leaves the files to say the columns, as before.
  auto columns = PrimitiveColumns(schema_string_, partition_columns_);
  return columns.ok() ? std::move(*columns) : arrow::FieldVector{};
}

std::optional<bool> DeltaFilter::Contains(const std::string& path, DeltaFile* file) {
  size_t best = tables_.size();
  for (size_t t = 0; t < tables_.size(); ++t) {
    const std::string& root = tables_[t].root;
    if (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
        path[root.size()] == '/' &&
        (best == tables_.size() || root.size() > tables_[best].root.size())) {
      best = t;
    }
  }
  if (best == tables_.size()) return std::nullopt;
  const auto& files = tables_[best].files;
  const std::string rel = path.substr(tables_[best].root.size() + 1);
  const auto it = std::lower_bound(files.begin(), files.end(), rel);
  if (it == files.end() || *it != rel) return false;
  const auto at = static_cast<size_t>(it - files.begin());
  found_[best][at] = true;
  if (file) {
    const auto& table = tables_[best];
    file->deleted = table.deleted[at];
    file->mapping = table.mapping;
    if (!table.partitions.empty()) {
      file->partitions = table.partitions[at];
    } else if (!table.folders_are_partitions) {
      file->partitions = PartitionPairs{};  // unpartitioned: no folder inside it is a column
    }
    file->in_table_size = rel.size();
    file->table = table.identity;
    file->columns = table.columns;
  }
  return true;
}

arrow::Status DeltaFilter::CheckAllFound(const std::string& shown, const std::string& base) const {
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (size_t f = 0; f < tables_[t].files.size(); ++f) {
      if (found_[t][f]) continue;
      const std::string& root = tables_[t].root;
      // A table below the source, the source itself, or one the source lies in.
      const std::string name = root.size() < base.size() ? root : shown + root.substr(base.size());
      return Error(ErrorKind::kNotFound,
                   Named(name) + ": version " + std::to_string(tables_[t].version) +
                       " holds the file '" + tables_[t].files[f] +
                       "', which is not in its folder (removed by a VACUUM while the version "
                       "was still read, or a partial copy?)");
    }
  }
  return arrow::Status::OK();
}

arrow::Status DeltaLookup::CheckLive(const std::string& file, const std::string& shown,
                                     DeltaFile* out) {
  std::string dir = file;
  while (ToParent(&dir)) {
    auto found = tables_.find(dir);
    if (found == tables_.end()) {
      ARROW_ASSIGN_OR_RAISE(auto table, TableAt(fs_, dir, remote_timeout_));
      found = tables_.emplace(dir, std::move(table)).first;
    }
    if (!found->second) continue;
    const auto& live = found->second->files;
    const std::string rel = file.substr(dir.size() + 1);
    const auto it = std::lower_bound(live.begin(), live.end(), rel);
    if (it != live.end() && *it == rel) {
      const auto at = static_cast<size_t>(it - live.begin());
      // Only this file's deletion vector is read.
      ARROW_RETURN_NOT_OK(ReadDeletions(fs_, remote_timeout_, &*found->second, at));
      if (out) {
        out->deleted = found->second->deleted[at];
        out->mapping = found->second->mapping;
        out->table = found->second->identity;
        out->columns = found->second->columns;
      }
      return arrow::Status::OK();
    }
    return Error(ErrorKind::kInvalidArgument,
                 "source '" + shown + "' is a file of the " + Named(dir) + " that its version " +
                     std::to_string(found->second->version) +
                     " does not hold (replaced or removed by a later commit, or the log "
                     "itself); name the table's folder to read the table");
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<DeltaTable>> ReadDeltaTables(
    arrow::fs::FileSystem& fs, const std::string& base,
    const std::vector<arrow::fs::FileInfo>& listed, const std::string& shown,
    double remote_timeout) {
  // Table root -> the files of its _delta_log/ (and below).
  std::map<std::string, std::vector<const arrow::fs::FileInfo*>> logs;
  for (const auto& info : listed) {
    const std::string& path = info.path();
    // The last "/_delta_log/" at or below the source folder.
    const size_t at = path.rfind(kLogDir);
    if (at == std::string::npos || at + 1 < base.size()) continue;
    logs[path.substr(0, at)].push_back(&info);
  }
  std::vector<DeltaTable> tables;
  for (const auto& [root, files] : logs) {
    // A table in a hidden folder (_temporary/, .snapshot/) is not data, like any file there.
    if (root.size() > base.size() && IsHiddenPath(root.substr(base.size() + 1))) continue;
    ARROW_ASSIGN_OR_RAISE(auto log, FindLogFiles(root, files));
    if (!log.any) continue;
    std::string name = shown;
    if (root.size() > base.size()) name += root.substr(base.size());
    ARROW_ASSIGN_OR_RAISE(auto table, ReadTable(fs, root, log, name, remote_timeout));
    tables.push_back(std::move(table));
  }
  ARROW_ASSIGN_OR_RAISE(auto enclosing, EnclosingTable(fs, base, remote_timeout));
  if (enclosing) tables.push_back(std::move(*enclosing));
  // The vectors of the files read (a partition folder's only, inside a table).
  for (auto& table : tables) ARROW_RETURN_NOT_OK(ReadDeletions(fs, remote_timeout, &table));
  return tables;
}

}  // namespace shardfeed
