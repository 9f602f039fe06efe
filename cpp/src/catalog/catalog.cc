#include "shardfeed/catalog.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include <arrow/filesystem/localfs.h>
#include <arrow/filesystem/path_util.h>
#include <arrow/io/interfaces.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "catalog/convert.h"
#include "catalog/delta_log.h"
#include "catalog/discover.h"
#include "catalog/file_check.h"
#include "catalog/footer.h"
#include "catalog/glob.h"
#include "catalog/listing.h"
#include "catalog/partition.h"
#include "catalog/remote_fs.h"
#include "catalog/table_formats.h"
#include "catalog/unify.h"
#include "shardfeed/status.h"
#include "storage/retry.h"
#include "util/deadline_file.h"
#include "util/file_identity.h"
#include "util/hash.h"
#include "util/parquet_error.h"
#include "util/read_properties.h"
#include "util/redact.h"
#include "util/string_array.h"
#include "util/struct_fields.h"

namespace shardfeed {

namespace {

// The dataset fingerprint's hash: two lanes of FNV-1a, as hex.  Frozen: the
// fingerprint is stored in state dicts, so this must give the same digest
// forever (it is deliberately not util/hash.h's Hash64, which may change).
class FingerprintHash {
 public:
  void Update(std::string_view bytes) {
    for (unsigned char c : bytes) {
      a_ = (a_ ^ c) * 0x100000001B3ULL;
      b_ = (b_ ^ c) * 0x100000001B3ULL + 0x9E3779B97F4A7C15ULL;
    }
  }
  void Update(int64_t v) { Update(std::to_string(v) + ";"); }
  std::string HexDigest() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    return buf;
  }

 private:
  uint64_t a_ = 0xCBF29CE484222325ULL;
  uint64_t b_ = 0x84222325CBF29CE4ULL;
};

bool IsUri(const std::string& s) { return s.find("://") != std::string::npos; }

// Local paths are made absolute so that Arrow's LocalFileSystem takes them.
std::string Normalize(const std::string& source) {
  if (IsUri(source)) return source;
  std::error_code ec;
  auto abs = std::filesystem::absolute(source, ec);
  return ec ? source : abs.lexically_normal().string();
}

std::string ParentDir(const std::string& path) {
  return arrow::fs::internal::GetAbstractPathParent(path).first;
}

// The longest common directory of `paths` ("a/b/c", "a/b/d/e" -> "a/b").
std::string CommonDir(const std::vector<std::string>& dirs) {
  std::string common = dirs.front();
  for (const auto& d : dirs) {
    while (!common.empty() && !(d == common || d.rfind(common + "/", 0) == 0 ||
                                (common == "/" && !d.empty() && d[0] == '/'))) {
      const std::string parent = ParentDir(common);
      common = (parent == common) ? std::string() : parent;
    }
  }
  return common;
}

std::string Relative(const std::string& root, const std::string& path) {
  if (root.empty()) return path;
  if (root == "/") return path.substr(1);
  return path.substr(root.size() + 1);
}

// A file's footer as the catalog keeps it: split by row group right after it
// is read (on the reading threads), so that the whole parsed footers of all
// files are never held at once.
struct Footer {
  std::shared_ptr<parquet::FileMetaData> metadata;  // without row groups
  std::shared_ptr<arrow::Schema> schema;            // top-level fields (what the fingerprint says)
  // Structs flattened (util/struct_fields.h): what the dataset's columns are
  // made of; the same as `schema` in a file without struct columns.
  std::shared_ptr<arrow::Schema> flat_schema;
  std::vector<std::vector<int>> struct_leaves;  // FileEntry::struct_leaves
  // Per field of flat_schema, the struct it lies in ("": a column of its own);
  // empty in a file without struct columns.
  std::vector<std::string> flat_origins;
  // Per field of flat_schema: a timestamp stored as INT96 (Spark's instants in UTC,
  // which Arrow reads without a zone); SchemaUnifier::Add's `int96`.
  std::vector<bool> int96;
  int64_t num_rows = 0;
  struct Part {
    int index = 0;  // in the file
    int64_t num_rows = 0;
    int64_t total_bytes = 0;
    std::shared_ptr<const std::string> footer;  // RowGroupEntry::footer
  };
  std::vector<Part> row_groups;  // those with rows
};

// A file listed from a folder.
struct Listed {
  std::string rel;  // relative to the dataset root
  arrow::fs::FileInfo info;
  bool sniff = false;     // no .parquet extension: read only when the magic says Parquet
  int source = 0;         // index of the source that listed it
  std::vector<int> also;  // other sources that listed the same file
  DeltaFile delta;        // a Delta table's file: its deleted rows, mapping, partitions
};

// For Arrow's refusal of a 128-bit integer (polars writes Int128 as 16 untyped bytes
// and says int128 in the Arrow schema it stores): the 16-byte columns with no Parquet
// type, one of which it is, as " (...)"; "" for another failure.
std::string UntypedWideColumns(const parquet::FileMetaData& metadata, const std::string& why) {
  if (why.find("more than 64 bits") == std::string::npos) return "";
  std::vector<std::string> names;
  const auto* schema = metadata.schema();
  for (int i = 0; schema && i < schema->num_columns(); ++i) {
    const auto* column = schema->Column(i);
    if (column->physical_type() == parquet::Type::FIXED_LEN_BYTE_ARRAY &&
        column->type_length() == 16 &&
        (!column->logical_type() || column->logical_type()->is_none())) {
      std::string name = "'";
      name.append(column->path()->ToDotString()).append("'");
      names.push_back(std::move(name));
    }
  }
  if (names.empty()) return "";
  std::string which = names[0];
  for (size_t k = 1; k < names.size(); ++k) which.append(", ").append(names[k]);
  return " (the file's Arrow schema says a 128-bit integer, as polars writes Int128, for " +
         std::string(names.size() == 1 ? "column " : "one of the columns ") + which +
         ": 16 bytes with no Parquet type, which no reader maps to Arrow; write it as Int64, "
         "or as a string or binary id)";
}

// `shown` (a source as the user gave it: a path, or a URI with its query) with its
// last `levels` path components left off: a folder above it, as the user would name it.
std::string ShownAbove(const std::string& shown, int levels) {
  const size_t scheme = shown.find("://");
  const size_t query = scheme == std::string::npos ? std::string::npos : shown.find('?', scheme);
  std::string path = shown.substr(0, query);
  const std::string rest = query == std::string::npos ? "" : shown.substr(query);
  for (int k = 0; k < levels; ++k) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || (scheme != std::string::npos && slash < scheme + 3)) break;
    path.resize(slash == 0 ? 1 : slash);
  }
  return path + rest;
}

// Per field of `flat`: a naive timestamp whose column is stored as INT96.
std::vector<bool> Int96Fields(const parquet::FileMetaData& metadata, const arrow::Schema& flat) {
  std::set<std::string> paths;
  const auto* schema = metadata.schema();
  for (int i = 0; schema && i < schema->num_columns(); ++i) {
    if (schema->Column(i)->physical_type() == parquet::Type::INT96) {
      paths.insert(schema->Column(i)->path()->ToDotString());
    }
  }
  std::vector<bool> out;
  for (const auto& field : flat.fields()) {
    const auto& type = *field->type();
    out.push_back(!paths.empty() && type.id() == arrow::Type::TIMESTAMP &&
                  static_cast<const arrow::TimestampType&>(type).timezone().empty() &&
                  paths.count(field->name()) > 0);
  }
  return out;
}

// The footer, or nullopt for a sniffed file that is not Parquet.
arrow::Result<std::optional<Footer>> ReadFooter(arrow::fs::FileSystem& fs, const Listed& file,
                                                double remote_timeout) {
  const std::string context = "file '" + file.rel + "'";
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> maybe_input;
  if (fs.type_name() == "local") {
    maybe_input = fs.OpenInputFile(file.info);
  } else {
    // Transient failures (503 SlowDown, a reset connection) are retried until
    // remote_timeout, as a row group's reads are (storage/retry.h).
    storage_internal::RetryPolicy policy;
    policy.deadline = DeadlineAfter(remote_timeout);
    auto remote = storage_internal::RemoteFile::Open(
        fs.shared_from_this(), file.info.path(), file.info.size(),
        storage_internal::RemoteName(fs, file.info.path()), policy,
        std::make_shared<std::atomic<int64_t>>(0));
    if (remote.ok()) {
      maybe_input = WithDeadline(*remote, remote_timeout);
    } else {
      maybe_input = remote.status();
    }
  }
  if (!maybe_input.ok()) return WithContext(maybe_input.status(), context);
  if (file.sniff) {
    auto magic = HasParquetMagic(**maybe_input, file.info.size());
    if (!magic.ok()) return WithContext(magic.status(), context);
    if (!*magic) return std::nullopt;
  }
  Footer footer;
  // Storage failures (access denied, connection lost) are not bad data.
  const ErrorContext error_context{file.rel, -1, "", "not a readable Parquet file"};
  BEGIN_PARQUET_CATCH
  footer.metadata = parquet::ReadMetaData(*maybe_input);
  END_PARQUET_CATCH(error_context, IoOutcome::kUnknown)
  int64_t size = file.info.size();
  if (size < 0) {  // a listing that did not say
    auto maybe_size = (*maybe_input)->GetSize();
    if (!maybe_size.ok()) return WithContext(maybe_size.status(), context);
    size = *maybe_size;
  }
  ARROW_RETURN_NOT_OK(ValidateFooter(*footer.metadata, size, file.rel));
  // The footer's Arrow fields (FromParquetSchema's), mapped once; without the
  // schema-level metadata (pandas, ARROW:schema): it says nothing about the rows.
  auto manifest = MakeManifest(*footer.metadata);
  if (!manifest.ok()) {
    // The footer's schema (or its embedded Arrow schema) is bad data, not a
    // storage failure: a retry would read the same bytes.
    const auto& st = manifest.status();
    return Error(st.IsNotImplemented() ? ErrorKind::kUnsupportedType : ErrorKind::kInvalidData,
                 context + ": cannot map the Parquet schema to Arrow: " + st.message() +
                     UntypedWideColumns(*footer.metadata, st.message()));
  }
  arrow::FieldVector top_fields;
  for (const auto& node : manifest->schema_fields) top_fields.push_back(node.field);
  footer.schema = arrow::schema(std::move(top_fields));
  footer.flat_schema = footer.schema;
  if (HasStructs(*manifest)) {
    arrow::FieldVector flat_fields;
    for (const auto& flat : FlattenStructs(*manifest)) {
      flat_fields.push_back(flat.field);
      const auto& top = manifest->schema_fields[static_cast<size_t>(flat.top)];
      footer.flat_origins.push_back(flat.path.empty() ? std::string() : top.field->name());
      footer.struct_leaves.emplace_back();
      CollectLeaves(*flat.node, &footer.struct_leaves.back());
    }
    footer.flat_schema = arrow::schema(std::move(flat_fields));
  }
  // Extension types (a UUID, a tensor, JSON) are their storage (convert.h).
  arrow::FieldVector stored;
  bool extended = false;
  for (const auto& field : footer.flat_schema->fields()) {
    auto type = StorageType(field->type());
    extended = extended || type != field->type();
    if (type == field->type()) {
      stored.push_back(field);
      continue;
    }
    auto collapsed = field->WithType(std::move(type));
    const std::string shape = CollapsedShape(*field->type());
    if (!shape.empty()) {
      auto metadata = field->metadata() ? field->metadata()->Copy()
                                        : std::make_shared<arrow::KeyValueMetadata>();
      metadata->Append(kShapeKey, shape);
      collapsed = collapsed->WithMetadata(std::move(metadata));
    }
    stored.push_back(std::move(collapsed));
  }
  if (extended) footer.flat_schema = arrow::schema(std::move(stored));
  footer.int96 = Int96Fields(*footer.metadata, *footer.flat_schema);
  for (const auto& field : footer.flat_schema->fields()) {
    // Python takes names as UTF-8 (a flipped footer byte made one that was not).
    if (!ValidUtf8(field->name())) {
      return Error(ErrorKind::kInvalidData,
                   context + ": a column name is not valid UTF-8 (a damaged footer?)");
    }
  }
  // Split: each row group's part, serialized; the rest without row groups.
  // (Arrow's serializer needs an encryptor for such a footer and crashes
  // without one; reading one needs keys this loader does not take anyway.)
  if (footer.metadata->is_encryption_algorithm_set()) {
    return Error(ErrorKind::kInvalidData,
                 context +
                     ": an encrypted Parquet file (plaintext footer); encryption is not "
                     "supported");
  }
  try {
    const auto& whole = *footer.metadata;
    footer.num_rows = whole.num_rows();
    for (int g = 0; g < whole.num_row_groups(); ++g) {
      auto rg = whole.RowGroup(g);
      if (rg->num_rows() == 0) continue;
      Footer::Part part;
      part.index = g;
      part.num_rows = rg->num_rows();
      part.total_bytes = rg->total_compressed_size();
      if (part.total_bytes == 0) {  // optional in the footer: add up the chunks
        for (int c = 0; c < rg->num_columns(); ++c) {
          part.total_bytes += rg->ColumnChunk(c)->total_compressed_size();
        }
        part.total_bytes = std::min(part.total_bytes, size);
      }
      part.footer = std::make_shared<const std::string>(whole.Subset({g})->SerializeToString());
      footer.row_groups.push_back(std::move(part));
    }
    footer.metadata = whole.Subset({});
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData, context + ": " + e.what());
  }
  return std::optional<Footer>(std::move(footer));
}

}  // namespace

std::string CacheKey(const Catalog& catalog, int32_t file) {
  return catalog.storage_id() + "|" + catalog.files()[static_cast<size_t>(file)].path;
}

bool Catalog::is_local() const { return fs_ && fs_->type_name() == "local"; }

std::vector<int64_t> Catalog::RowGroupRows() const {
  std::vector<int64_t> rows;
  rows.reserve(row_groups_.size());
  for (const auto& rg : row_groups_) rows.push_back(rg.num_rows);
  return rows;
}

namespace {

// The filesystem of a source and the path in it.  A remote one is made
// within remote_timeout: making an S3 client waits (in Arrow, on a lock) for
// every request still in flight on any client, so after a stalled server a
// second try waited for the first's abandoned request (~100 s).  Its
// requests stop retrying within remote_timeout too (MakeRemoteFileSystem).
arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> OpenFileSystem(const std::string& source,
                                                                     std::string* path,
                                                                     double remote_timeout) {
  const auto scheme_end = source.find("://");
  if (scheme_end == std::string::npos || source.compare(0, scheme_end, "file") == 0 ||
      !(remote_timeout > 0)) {
    return arrow::fs::FileSystemFromUriOrPath(source, path);
  }
  // One filesystem per (process, scheme and authority, options, credentials in
  // the environment), kept for the process: a later Loader of the same store
  // makes no new client, so it does not wait on that lock at all.  Never freed
  // (no client destructor after Arrow's S3 finalization at exit); a forked
  // child makes its own (clients do not survive a fork).
  std::string key = std::to_string(::getpid()) + "\n";
  const size_t path_start = source.find('/', scheme_end + 3);
  const size_t query = source.find('?');
  key += source.substr(0, std::min(path_start, query)) + "\n";
  if (query != std::string::npos) key += source.substr(query);
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                           "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                           "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
                           "AWS_EC2_METADATA_DISABLED", "GOOGLE_APPLICATION_CREDENTIALS"}) {
    const char* value = std::getenv(name);
    key.append("\n").append(value ? value : "\x01");
  }
  static auto* mu = new std::mutex;
  static auto* made_before = new std::map<std::string, std::shared_ptr<arrow::fs::FileSystem>>;
  {
    std::lock_guard<std::mutex> lock(*mu);
    if (const auto it = made_before->find(key); it != made_before->end()) {
      if (auto in_fs = it->second->PathFromUri(source); in_fs.ok()) {
        *path = std::move(*in_fs);
        return it->second;
      }
    }
  }
  using Made = std::pair<std::shared_ptr<arrow::fs::FileSystem>, std::string>;
  ARROW_ASSIGN_OR_RAISE(auto made, CallBefore<Made>(
                                       [source, remote_timeout]() -> arrow::Result<Made> {
                                         std::string in_fs;
                                         ARROW_ASSIGN_OR_RAISE(
                                             auto fs,
                                             MakeRemoteFileSystem(source, remote_timeout, &in_fs));
                                         return Made{std::move(fs), std::move(in_fs)};
                                       },
                                       DeadlineAfter(remote_timeout), remote_timeout, nullptr));
  {
    std::lock_guard<std::mutex> lock(*mu);
    made_before->emplace(key, made.first);
  }
  *path = std::move(made.second);
  return std::move(made.first);
}

}  // namespace

// Builds a catalog in steps; a friend of Catalog.
struct CatalogBuilder {
  Catalog& catalog;
  const CatalogOptions& options;
  std::vector<Listed> listed;
  std::vector<std::string> dir_sources;   // per source: its text when a folder, else empty
  std::vector<std::string> source_paths;  // per source: its path on the filesystem
  // Per source path: the glob that matched it (an id shared by its matches:
  // CatalogOptions::source_globs for a local glob's, or a URI's), -1 for a path named.
  std::vector<int> source_glob;
  // Folders the root must contain: the fixed parts of globs (a pattern's
  // partition keys below it are columns, however many values the matches
  // have), and CatalogOptions::base_dirs.
  std::vector<std::string> bases;

  std::optional<DeltaLookup> delta_files;  // the tables explicitly named files lie in

  arrow::Status List(const std::vector<std::string>& sources);
  // Lists one path of a source (`raw` names it in errors): a file, or a folder's files.
  arrow::Status AddPath(const std::string& path, const std::string& raw,
                        const arrow::fs::FileInfo& info);
  // The paths a URI's glob pattern matches (glob.h), with their infos (a local
  // path's glob was expanded in Python).
  arrow::Result<std::vector<std::pair<std::string, arrow::fs::FileInfo>>> Expand(
      const std::string& pattern, const std::string& raw);
  arrow::Result<std::vector<std::optional<Footer>>> ReadFooters();
  arrow::Status Build(std::vector<std::optional<Footer>> footers);
  // `columns`: the files' (SchemaUnifier::Columns, and a Delta log's beyond
  // them), `maps` each file's field map into them (FieldMaps).
  // `unifier`: what tells a key named like a struct or its field.
  arrow::Status SetSchema(const std::vector<UnifiedColumn>& columns,
                          std::vector<std::vector<int>> maps, const std::vector<int32_t>& kept,
                          const SchemaUnifier& unifier);
};

// 1. Resolves every source on one filesystem and lists the candidate files.
arrow::Status CatalogBuilder::List(const std::vector<std::string>& sources) {
  const auto& globs = options.source_globs;
  if (!globs.empty() &&
      (globs.size() != sources.size() || std::any_of(globs.begin(), globs.end(), [&](int g) {
         return g < -1 || g >= static_cast<int>(sources.size());
       }))) {
    return Error(ErrorKind::kInvalidArgument,
                 "source_globs: one glob id in [-1, sources) per source expected");
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    const std::string& raw = sources[k];
    const std::string source = Normalize(raw);
    std::string path;
    auto maybe_fs = OpenFileSystem(source, &path, options.remote_timeout);
    if (!maybe_fs.ok()) {
      if (KindOf(maybe_fs.status()) == ErrorKind::kStorage) {
        return WithContext(maybe_fs.status(), "source '" + raw + "'");
      }
      return Error(ErrorKind::kInvalidArgument,
                   "cannot open source '" + raw + "': " + maybe_fs.status().message());
    }
    if (!catalog.fs_) {
      catalog.fs_ = *maybe_fs;
      // Without secrets: the id is stored in cache entries, and credentials do
      // not change which objects a URI names.
      catalog.storage_id_ =
          StorageId(catalog.fs_->type_name(), RedactUri(source), std::getenv("AWS_ENDPOINT_URL"));
    } else if ((*maybe_fs)->type_name() != catalog.fs_->type_name()) {
      return Error(ErrorKind::kInvalidArgument, "sources must live on one filesystem: '" + raw +
                                                    "' is on " + (*maybe_fs)->type_name() +
                                                    ", the first on " + catalog.fs_->type_name());
    }
    ARROW_RETURN_NOT_OK(CheckObjectKey(*catalog.fs_, path, raw));
    auto maybe_info = FileInfoWithin(*catalog.fs_, path, options.remote_timeout);
    if (!maybe_info.ok()) return WithContext(maybe_info.status(), "source '" + raw + "'");
    const auto& info = *maybe_info;
    if (info.type() != arrow::fs::FileType::NotFound) {
      ARROW_RETURN_NOT_OK(AddPath(path, raw, info));
      if (!globs.empty()) source_glob.back() = globs[k];  // a local glob's match
      continue;
    }
    if (!HasGlobMagic(path)) {  // (a local path's glob was expanded in Python: file://)
      return Error(ErrorKind::kNotFound, "source '" + raw + "' does not exist");
    }
    ARROW_ASSIGN_OR_RAISE(auto matches, Expand(path, raw));
    // Ids past those of local globs (CatalogOptions::source_globs, < sources).
    const int glob = static_cast<int>(sources.size() + source_glob.size());
    for (const auto& [match, match_info] : matches) {
      ARROW_RETURN_NOT_OK(AddPath(match, raw + " (" + match + ")", match_info));
      source_glob.back() = glob;
    }
  }
  for (const auto& base : options.base_dirs) {
    std::string path;
    if (catalog.fs_ && OpenFileSystem(Normalize(base), &path, options.remote_timeout).ok()) {
      bases.push_back(path);
    }
  }
  const bool single_dir = bases.empty() && dir_sources.size() == 1 && !dir_sources.front().empty();
  if (single_dir) {
    catalog.root_ = source_paths.front();
    while (catalog.root_.size() > 1 && catalog.root_.back() == '/') catalog.root_.pop_back();
  } else {
    std::vector<std::string> dirs;
    for (const auto& file : listed) dirs.push_back(ParentDir(file.info.path()));
    for (auto base : bases) {
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      dirs.push_back(std::move(base));
    }
    if (dirs.empty()) dirs.push_back(source_paths.front());
    catalog.root_ = CommonDir(dirs);
  }
  for (auto& file : listed) file.rel = Relative(catalog.root_, file.info.path());
  std::stable_sort(listed.begin(), listed.end(),
                   [](const Listed& x, const Listed& y) { return x.rel < y.rel; });
  // Sources are read as a set of files: a file listed twice (two overlapping
  // folders, a folder and a file in it, a file named twice) is read once.
  // On the local filesystem also a file reached by two paths (a folder and a
  // symlink to it, a glob through both, a symlink or hard link to a file in
  // the same folder): by identity, the first path in order kept.  Not one
  // linked into two partition folders (k=1/ and k=2/): under Hive
  // partitioning those are rows with other keys, read under each.
  const bool by_identity = catalog.fs_->type_name() == "local";
  const bool hive = options.partitioning == Partitioning::kHive;
  // identity and partition keys -> index in kept
  std::map<std::tuple<dev_t, ino_t, PartitionPairs>, size_t> first;
  std::vector<Listed> kept;
  for (auto& file : listed) {
    Listed* same = !kept.empty() && kept.back().rel == file.rel ? &kept.back() : nullptr;
    struct stat st;
    if (!same && by_identity && ::stat(file.info.path().c_str(), &st) == 0) {
      const auto [at, fresh] = first.emplace(
          std::tuple{st.st_dev, st.st_ino, hive ? ParseHivePath(file.rel) : PartitionPairs{}},
          kept.size());
      if (!fresh) same = &kept[at->second];
    }
    if (same) {
      same->also.push_back(file.source);
      continue;
    }
    kept.push_back(std::move(file));
  }
  listed = std::move(kept);
  if (!options.only_files.empty()) {
    std::vector<Listed> chosen;
    size_t next = 0;  // both in the order of their relative paths
    std::vector<std::string> wanted = options.only_files;
    std::sort(wanted.begin(), wanted.end());
    for (auto& file : listed) {
      if (next < wanted.size() && wanted[next] < file.rel) break;  // one is gone
      if (next < wanted.size() && wanted[next] == file.rel) {
        chosen.push_back(std::move(file));
        ++next;
      }
    }
    if (next < wanted.size()) {
      return Error(ErrorKind::kNotFound,
                   "file '" + wanted[next] + "' of the dataset is gone from its source");
    }
    listed = std::move(chosen);
  }
  return arrow::Status::OK();
}

arrow::Status CatalogBuilder::AddPath(const std::string& path, const std::string& raw,
                                      const arrow::fs::FileInfo& info) {
  source_paths.push_back(path);
  source_glob.push_back(-1);
  const int source_index = static_cast<int>(dir_sources.size());
  dir_sources.emplace_back();
  if (info.type() != arrow::fs::FileType::Directory) {
    // A FIFO would block the open forever, a device read without end.
    struct stat st;
    if (catalog.fs_->type_name() == "local" && ::stat(path.c_str(), &st) == 0 &&
        !S_ISREG(st.st_mode)) {
      const char* what = S_ISFIFO(st.st_mode)   ? "a named pipe (FIFO)"
                         : S_ISCHR(st.st_mode)  ? "a character device"
                         : S_ISBLK(st.st_mode)  ? "a block device"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "not a regular file";
      return Error(ErrorKind::kInvalidArgument,
                   "source '" + raw + "' is " + what + ", not a Parquet file");
    }
    // A file of a Delta table is read only if the table's latest version holds it.
    if (!delta_files) delta_files.emplace(*catalog.fs_, options.remote_timeout);
    DeltaFile live;
    ARROW_RETURN_NOT_OK(delta_files->CheckLive(path, raw, &live));
    // A file named explicitly: always read.
    listed.push_back({"", info, false, source_index, {}, std::move(live)});
    return arrow::Status::OK();
  }
  dir_sources.back() = raw;
  // Directory symlinks followed at most once (a loop reads nothing twice).
  ARROW_ASSIGN_OR_RAISE(auto files, ListFiles(*catalog.fs_, path, raw, options.remote_timeout));
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  ARROW_ASSIGN_OR_RAISE(auto tables,
                        ReadDeltaTables(*catalog.fs_, base, files, raw, options.remote_timeout));
  std::vector<std::string> delta_roots;
  for (const auto& table : tables) {
    catalog.delta_tables_.push_back(
        {table.root, table.version, static_cast<int64_t>(table.files.size())});
    delta_roots.push_back(table.root);
  }
  ARROW_RETURN_NOT_OK(
      CheckTableFormats(*catalog.fs_, base, files, delta_roots, raw, options.remote_timeout));
  DeltaFilter delta(tables);
  for (auto& child : files) {
    if (!child.IsFile()) continue;
    DeltaFile live;
    if (const auto in_table = delta.Contains(child.path(), &live)) {
      // A Delta table's live files, and nothing else of it (removed versions, its log).
      if (*in_table) {
        listed.push_back({"", std::move(child), false, source_index, {}, std::move(live)});
      }
      continue;
    }
    // Hidden below the folder given, as Spark, Hive and pyarrow.dataset skip them.
    // (Keys with "." or ".." components are hidden too: never read, never aliased.)
    if (IsHiddenPath(Relative(base, child.path()))) continue;
    const bool sniff = !HasParquetExtension(child.path());
    listed.push_back({"", std::move(child), sniff, source_index, {}, {}});
  }
  ARROW_RETURN_NOT_OK(delta.CheckAllFound(raw, base));
  return arrow::Status::OK();
}

arrow::Result<std::vector<std::pair<std::string, arrow::fs::FileInfo>>> CatalogBuilder::Expand(
    const std::string& pattern, const std::string& raw) {
  const std::string fixed = GlobFixedPart(pattern);
  if (!fixed.empty()) bases.push_back(fixed);
  std::map<std::string, arrow::fs::FileInfo> files;  // what is listed below the fixed part
  if (!fixed.empty()) {
    auto maybe_info = FileInfoWithin(*catalog.fs_, fixed, options.remote_timeout);
    if (!maybe_info.ok()) return WithContext(maybe_info.status(), "source '" + raw + "'");
    const int depth = GlobDepth(pattern);
    if (maybe_info->type() == arrow::fs::FileType::Directory && depth == -1) {
      ARROW_ASSIGN_OR_RAISE(auto listing,
                            ListFiles(*catalog.fs_, fixed, raw, options.remote_timeout));
      for (auto& file : listing) {
        if (file.IsFile()) files.emplace(file.path(), std::move(file));
      }
    } else if (maybe_info->type() == arrow::fs::FileType::Directory) {
      // Only as deep as the pattern reaches: `table/*.parquet` lists one level of the
      // table, not every key below it (a thousand keys a request).  Folders come too:
      // a match may be a folder whose files lie deeper.
      arrow::fs::FileSelector selector;
      selector.base_dir = fixed;
      selector.recursive = depth > 1;
      selector.max_recursion = depth - 1;
      auto maybe_list = ListWithin(*catalog.fs_, selector, options.remote_timeout);
      if (!maybe_list.ok()) return WithContext(maybe_list.status(), "listing '" + raw + "'");
      for (auto& entry : *maybe_list) {
        if (entry.IsFile() || entry.IsDirectory()) files.emplace(entry.path(), std::move(entry));
      }
    }
  }
  std::vector<std::string> paths;
  for (const auto& [path, _] : files) paths.push_back(path);
  std::vector<std::pair<std::string, arrow::fs::FileInfo>> out;
  for (auto& match : MatchGlob(pattern, paths)) {
    const auto file = files.find(match);
    // Not listed: a folder above some file (object stores have no folders of their own).
    auto info = file != files.end() ? file->second
                                    : arrow::fs::FileInfo(match, arrow::fs::FileType::Directory);
    out.emplace_back(std::move(match), std::move(info));
  }
  if (out.empty()) {
    return Error(ErrorKind::kNotFound, "source '" + raw + "' matches no file or folder");
  }
  return out;
}

// 2. Reads the footers in parallel; the first error (in file order) wins.
arrow::Result<std::vector<std::optional<Footer>>> CatalogBuilder::ReadFooters() {
  std::vector<arrow::Result<std::optional<Footer>>> results(listed.size(),
                                                            arrow::Status::Cancelled("unread"));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < listed.size(); i = next++) {
      results[i] = ReadFooter(*catalog.fs_, listed[i], options.remote_timeout);
    }
  };
  const size_t nthreads =
      std::min<size_t>(listed.size(), static_cast<size_t>(std::max(1, options.num_threads)));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  std::vector<std::optional<Footer>> footers;
  std::vector<size_t> found(dir_sources.size(), 0);
  for (size_t i = 0; i < results.size(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto footer, std::move(results[i]));
    if (footer) {
      ++found[static_cast<size_t>(listed[i].source)];
      for (const int s : listed[i].also) ++found[static_cast<size_t>(s)];
    }
    footers.push_back(std::move(footer));
  }
  // The globs some match of which holds a file.
  std::set<int> globs_found;
  for (size_t s = 0; s < dir_sources.size(); ++s) {
    if (source_glob[s] >= 0 && found[s] > 0) globs_found.insert(source_glob[s]);
  }
  for (size_t s = 0; s < dir_sources.size(); ++s) {
    if (!dir_sources[s].empty() && found[s] == 0) {
      // A folder a glob matched (`s3://lake/k=*`) may hold no data, as Spark's
      // empty partitions and output folders of only _SUCCESS do: the glob as a
      // whole must find a file, not each match.
      const int glob = source_glob[s];
      if (globs_found.count(glob) > 0) continue;
      // A Delta table whose latest version has no rows (everything deleted)
      // lists no live file, though its folder holds old versions' files.
      // A folder of a table (a partition's, `t/k=1`) may hold only files the
      // table no longer has (rewritten to other partitions): the table says so.
      std::string table = source_paths[s];
      for (int up = 0; up < 16 && !table.empty(); ++up) {
        auto log = FileInfoWithin(*catalog.fs_, table + "/_delta_log", options.remote_timeout);
        if (log.ok() && log->IsDirectory()) {
          if (up == 0) {
            return Error(ErrorKind::kNotFound, "the Delta table '" + dir_sources[s] +
                                                   "' has no data files in its latest version "
                                                   "(it is empty): nothing to read");
          }
          return Error(ErrorKind::kNotFound,
                       "'" + dir_sources[s] + "' is a folder of the Delta table '" +
                           ShownAbove(dir_sources[s], up) +
                           "', whose latest version has no data files there (removed, or "
                           "rewritten into other folders): nothing to read");
        }
        const std::string parent = arrow::fs::internal::GetAbstractPathParent(table).first;
        if (parent == table) break;
        table = parent;
      }
      return Error(ErrorKind::kNotFound,
                   "no Parquet files under '" + dir_sources[s] + "'" +
                       (glob >= 0 ? " (nor under any other path its glob matched)" : ""));
    }
  }
  return footers;
}

// The dataset schema: the promoted file columns, then the partition keys that
// no file column shadows (a file's own column wins, as in pyarrow.dataset).
arrow::Status CatalogBuilder::SetSchema(const std::vector<UnifiedColumn>& columns,
                                        std::vector<std::vector<int>> maps,
                                        const std::vector<int32_t>& kept,
                                        const SchemaUnifier& unifier) {
  arrow::FieldVector fields;
  for (const auto& column : columns) {
    fields.push_back(column.field);
    catalog.origins_.push_back(
        {-1, column.file_types, column.missing_files, column.conflict, column.struct_origin});
  }
  catalog.partition_schema_ = arrow::schema({});
  // A partitioned Delta table's keys are columns of the table (its log gives their
  // values), whatever `partitioning` says of the folders.
  const bool hive = options.partitioning == Partitioning::kHive;
  // Under partitioning=None: every partitioned table's keys, in order of first sight;
  // a file reads null in the keys its table (or no table) has not.
  std::vector<std::string> delta_keys;
  for (int32_t i : kept) {
    const auto& keys = listed[static_cast<size_t>(i)].delta.partitions;
    if (!keys) continue;
    for (const auto& key : *keys) {
      if (std::find(delta_keys.begin(), delta_keys.end(), key.first) == delta_keys.end()) {
        delta_keys.push_back(key.first);
      }
    }
  }
  if ((hive || !delta_keys.empty()) && !kept.empty()) {
    std::vector<std::string> rels;
    std::vector<PartitionPairs> pairs;
    for (int32_t i : kept) {
      const auto& file = listed[static_cast<size_t>(i)];
      rels.push_back(file.rel);
      if (!hive) {
        // Its table's values, null in the other tables' keys (and a plain file, read
        // by its path, null in all), as in a column it lacks.
        pairs.emplace_back();
        for (const auto& key : delta_keys) {
          std::optional<std::string> value;
          if (file.delta.partitions) {
            for (const auto& [name, given] : *file.delta.partitions) {
              if (name == key) value = given;
            }
          }
          pairs.back().emplace_back(key, std::move(value));
        }
        continue;
      }
      if (!file.delta.partitions) {
        pairs.push_back(ParseHivePath(file.rel));
        // Delta writes a null partition value as "k=".
        const bool in_delta = std::any_of(
            catalog.delta_tables_.begin(), catalog.delta_tables_.end(), [&](const auto& t) {
              const std::string& path = file.info.path();
              return path.size() > t.table.size() &&
                     path.compare(0, t.table.size(), t.table) == 0 && path[t.table.size()] == '/';
            });
        for (auto& pair : pairs.back()) {
          if (in_delta && pair.second && pair.second->empty()) pair.second.reset();
        }
        continue;
      }
      // A partitioned Delta table's file: the folders above the table's, then
      // the table's own values from its log (its folders may not name them).
      const size_t above = file.rel.size() - std::min(file.rel.size(), file.delta.in_table_size);
      pairs.push_back(ParseHivePath(file.rel.substr(0, above)));
      pairs.back().insert(pairs.back().end(), file.delta.partitions->begin(),
                          file.delta.partitions->end());
    }
    ARROW_ASSIGN_OR_RAISE(PartitionTable partitions, InferPartitions(rels, pairs));
    catalog.partition_schema_ = partitions.schema;
    for (size_t f = 0; f < catalog.files_.size(); ++f) {
      catalog.files_[f].partition_values = std::move(partitions.values[f]);
    }
    for (int k = 0; k < partitions.schema->num_fields(); ++k) {
      const auto& field = partitions.schema->field(k);
      // Flattened, a struct's fields are columns named 's.a': a key 's' or
      // 's.a' would be delivered beside them, or silently lose to one.
      if (const std::string clash = unifier.StructNamed(field->name()); !clash.empty()) {
        std::string folder;
        for (size_t r = 0; r < rels.size() && folder.empty(); ++r) {
          for (const auto& [key, value] : pairs[r]) {
            if (key == field->name()) folder = rels[r];
          }
        }
        std::string message = "partition key '";
        message.append(field->name())
            .append("' (file '")
            .append(folder)
            .append("') has the name of ")
            .append(clash)
            .append(
                ": it could stand for neither; rename the folders, or read them as plain "
                "folders with partitioning=None");
        return Error(ErrorKind::kSchemaMismatch, message);
      }
      const bool shadowed = std::any_of(fields.begin(), fields.end(), [&](const auto& other) {
        return other->name() == field->name();
      });
      if (shadowed) continue;
      fields.push_back(field);
      catalog.origins_.push_back({k, {field->type()->ToString()}, 0, "", ""});
    }
  }
  catalog.schema_ = arrow::schema(fields);
  for (size_t f = 0; f < catalog.files_.size(); ++f) {
    auto& map = catalog.files_[f].field_map;
    map = std::move(maps[f]);
    map.resize(fields.size(), -1);
  }
  return arrow::Status::OK();
}

// 3. Builds the row-group table and the dataset schema.
arrow::Status CatalogBuilder::Build(std::vector<std::optional<Footer>> footers) {
  FingerprintHash hash;
  SchemaUnifier unifier;
  // The first file with rows decides the fingerprint's schema (else the first file).
  std::shared_ptr<arrow::Schema> first_schema, first_flat;
  bool first_has_rows = false;
  std::vector<int32_t> kept;  // listed index of each catalog file
  for (size_t i = 0; i < listed.size(); ++i) {
    if (!footers[i]) continue;  // not Parquet
    Footer& footer = *footers[i];
    const auto& rel = listed[i].rel;
    const bool has_rows = footer.num_rows > 0;
    if (!first_schema || (!first_has_rows && has_rows)) {
      first_schema = footer.schema;
      first_flat = footer.flat_schema;
      first_has_rows = has_rows;
    }
    if (!has_rows) continue;  // zero-row files are skipped
    if (const auto& mapping = listed[i].delta.mapping) {
      // A Delta table mapped by name: its fields under the table's names, and
      // the columns dropped from its schema left out.
      arrow::FieldVector fields;
      std::vector<bool> hidden;
      for (const auto& field : footer.flat_schema->fields()) {
        const auto name = DisplayName(*mapping, field->name());
        hidden.push_back(!name);
        fields.push_back(name ? field->WithName(*name) : field);
      }
      unifier.Add(rel, arrow::Schema(std::move(fields)), &hidden);
    } else {
      unifier.Add(rel, *footer.flat_schema, nullptr, footer.schema.get(),
                  footer.flat_origins.empty() ? nullptr : &footer.flat_origins, &footer.int96);
    }
    FileEntry entry;
    entry.path = listed[i].info.path();
    entry.rel_path = rel;
    entry.size = listed[i].info.size();
    const auto mtime = listed[i].info.mtime();
    if (mtime != arrow::fs::kNoTime) {
      entry.version = std::to_string(mtime.time_since_epoch().count());
    }
    if (catalog.is_local()) entry.identity = StatIdentityAt(entry.path);
    const auto file_index = static_cast<int32_t>(catalog.files_.size());
    hash.Update(rel);
    for (const auto& part : footer.row_groups) {
      RowGroupEntry row_group;
      row_group.footer = part.footer;
      row_group.file = file_index;
      row_group.row_group = part.index;
      row_group.num_rows = part.num_rows;
      row_group.first_row = catalog.num_rows_;
      row_group.total_bytes = part.total_bytes;
      catalog.num_rows_ += part.num_rows;
      catalog.row_groups_.push_back(row_group);
      hash.Update(part.num_rows);
    }
    hash.Update("\n");
    if (const auto& deleted = listed[i].delta.deleted) {
      if (!deleted->runs.empty() && deleted->runs.back().end > footer.num_rows) {
        return Error(ErrorKind::kInvalidData,
                     "file '" + rel + "': its Delta deletion vector deletes row " +
                         std::to_string(deleted->runs.back().end - 1) + ", but the file has " +
                         std::to_string(footer.num_rows) + " rows");
      }
      // Other deleted rows are another dataset (without a vector the digest is as before).
      hash.Update("deleted:" + deleted->id + "\n");
      entry.deleted = deleted;
      catalog.has_deletions_ = true;
    }
    entry.metadata = std::move(footer.metadata);
    entry.struct_leaves = std::move(footer.struct_leaves);
    catalog.files_.push_back(std::move(entry));
    kept.push_back(static_cast<int32_t>(i));
  }
  if (kept.empty() && first_schema) unifier.Add("", *first_flat);  // only zero-row files
  std::vector<UnifiedColumn> columns = unifier.Columns();
  // A Delta table's columns that no file holds yet (ADD COLUMNS since its last
  // write: null in every row), and, where the files read are one table's
  // alone, those they hold narrower than its schema now says (type widening,
  // every file older): as its log says, as Delta's readers give them.  Once
  // per table, however its files were named (`t`, `t/k=*`, `t/*.parquet`);
  // of two tables adding one column, the first's type.
  std::vector<const DeltaFile*> tables;  // a file of each table, in order
  bool one_table = !kept.empty();
  for (int32_t i : kept) {
    const DeltaFile& delta = listed[static_cast<size_t>(i)].delta;
    one_table = one_table && !delta.table.empty() &&
                delta.table == listed[static_cast<size_t>(kept[0])].delta.table;
    const bool seen = std::any_of(tables.begin(), tables.end(),
                                  [&](const DeltaFile* t) { return t->table == delta.table; });
    if (delta.columns && !seen) tables.push_back(&delta);
  }
  bool declared = false;
  for (const DeltaFile* table : tables) {
    const auto beyond = ColumnsBeyond(columns, *table->columns, one_table);
    declared = ApplyColumnsBeyond(beyond, static_cast<int64_t>(kept.size()), &columns) || declared;
  }
  // Only zero-row files: their folders still say the partition columns.
  std::vector<int32_t> schema_files = kept;
  for (size_t i = 0; kept.empty() && i < listed.size(); ++i) {
    if (footers[i]) schema_files.push_back(static_cast<int32_t>(i));
  }
  ARROW_RETURN_NOT_OK(SetSchema(columns, unifier.FieldMaps(), schema_files, unifier));
  // The digest of earlier versions when the files agree; else the promoted schema.
  if (first_schema) {
    arrow::FieldVector file_fields;
    for (const auto& column : columns) file_fields.push_back(column.field);
    hash.Update(unifier.uniform() && !declared ? first_schema->ToString()
                                               : arrow::schema(file_fields)->ToString());
  }
  if (catalog.partition_schema_->num_fields() > 0) {
    hash.Update("partitions:" + catalog.partition_schema_->ToString());
  }
  catalog.fingerprint_ = hash.HexDigest();
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<Catalog>> Catalog::Open(const std::vector<std::string>& sources,
                                                      const CatalogOptions& options) {
  auto result = OpenUnredacted(sources, options);
  if (result.ok()) return result;
  // Messages quote sources (and Arrow's quote URIs): no credential may leave.
  std::string message = result.status().message();
  for (const auto& source : sources) message = RedactSecrets(std::move(message), source);
  return Error(KindOf(result.status()), std::move(message));
}

arrow::Result<std::shared_ptr<Catalog>> Catalog::OpenUnredacted(
    const std::vector<std::string>& sources, const CatalogOptions& options) {
  if (sources.empty()) return Error(ErrorKind::kInvalidArgument, "no source given");
  auto catalog = std::make_shared<Catalog>();
  CatalogBuilder builder{*catalog, options, {}, {}, {}, {}, {}, {}};
  ARROW_RETURN_NOT_OK(builder.List(sources));
  ARROW_ASSIGN_OR_RAISE(auto footers, builder.ReadFooters());
  ARROW_RETURN_NOT_OK(builder.Build(std::move(footers)));
#ifdef __GLIBC__
  // The whole footers were parsed (Thrift, the C library's heap) and are now
  // freed; give the pages back rather than keep them as free heap.
  malloc_trim(0);
#endif
  return catalog;
}

arrow::Result<std::shared_ptr<parquet::FileMetaData>> RowGroupFooter(const RowGroupEntry& rg) {
  if (!rg.footer) return Error(ErrorKind::kInvalidArgument, "a row group without its footer");
  try {
    return parquet::FileMetaData::Make(rg.footer->data(), static_cast<int64_t>(rg.footer->size()));
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData, std::string("row group footer: ") + e.what());
  }
}

}  // namespace shardfeed
