#include "shardfeed/catalog.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include <arrow/filesystem/localfs.h>
#include <arrow/filesystem/path_util.h>
#include <arrow/io/interfaces.h>
#include <arrow/type.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "catalog/file_check.h"
#include "catalog/listing.h"
#include "shardfeed/status.h"
#include "util/deadline_file.h"
#include "util/hash.h"
#include "util/redact.h"

namespace shardfeed {

namespace {

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

struct Footer {
  std::shared_ptr<parquet::FileMetaData> metadata;
  std::shared_ptr<arrow::Schema> schema;
};

arrow::Result<Footer> ReadFooter(arrow::fs::FileSystem& fs, const arrow::fs::FileInfo& info,
                                 const std::string& rel, double remote_timeout) {
  const std::string context = "file '" + rel + "'";
  auto maybe_input = fs.OpenInputFile(info);
  if (!maybe_input.ok()) return WithContext(maybe_input.status(), context);
  if (fs.type_name() != "local") maybe_input = WithDeadline(*maybe_input, remote_timeout);
  Footer footer;
  try {
    footer.metadata = parquet::ReadMetaData(*maybe_input);
  } catch (const parquet::ParquetStatusException& e) {
    // Storage failures (access denied, connection lost) are not bad data.
    if (e.status().IsIOError()) return WithContext(e.status(), context);
    return Error(ErrorKind::kInvalidData,
                 context + ": not a readable Parquet file (" + e.what() + ")");
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData,
                 context + ": not a readable Parquet file (" + e.what() + ")");
  }
  parquet::ArrowReaderProperties props;
  auto st = parquet::arrow::FromParquetSchema(
      footer.metadata->schema(), props, footer.metadata->key_value_metadata(), &footer.schema);
  if (!st.ok()) return WithContext(st, context + ": cannot map the Parquet schema to Arrow");
  // Drop schema-level metadata (pandas, ARROW:schema): it says nothing about the rows.
  footer.schema = footer.schema->RemoveMetadata();
  return footer;
}

std::string DescribeDifference(const arrow::Schema& a, const arrow::Schema& b) {
  for (int i = 0; i < std::max(a.num_fields(), b.num_fields()); ++i) {
    if (i >= a.num_fields()) return "extra column '" + b.field(i)->name() + "'";
    if (i >= b.num_fields()) return "missing column '" + a.field(i)->name() + "'";
    if (!a.field(i)->Equals(*b.field(i), /*check_metadata=*/false)) {
      const auto& fa = *a.field(i);
      const auto& fb = *b.field(i);
      if (fa.name() != fb.name()) {
        return "column " + std::to_string(i) + " is '" + fb.name() + "', expected '" + fa.name() +
               "'";
      }
      return "column '" + fb.name() + "' is " + fb.type()->ToString() +
             (fb.nullable() ? "" : " not null") + ", expected " + fa.type()->ToString() +
             (fa.nullable() ? "" : " not null");
    }
  }
  return "field metadata differs";
}

}  // namespace

bool Catalog::is_local() const { return fs_ && fs_->type_name() == "local"; }

std::vector<int64_t> Catalog::RowGroupRows() const {
  std::vector<int64_t> rows;
  rows.reserve(row_groups_.size());
  for (const auto& rg : row_groups_) rows.push_back(rg.num_rows);
  return rows;
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

  // 1. Resolve every source on one filesystem and list the Parquet files.
  std::vector<arrow::fs::FileInfo> infos;
  std::vector<std::string> source_paths;
  bool single_dir = false;
  for (const auto& raw : sources) {
    const std::string source = Normalize(raw);
    std::string path;
    auto maybe_fs = arrow::fs::FileSystemFromUriOrPath(source, &path);
    if (!maybe_fs.ok()) {
      return Error(ErrorKind::kInvalidArgument,
                   "cannot open source '" + raw + "': " + maybe_fs.status().message());
    }
    if (!catalog->fs_) {
      catalog->fs_ = *maybe_fs;
      // Without secrets: the id is stored in cache entries, and credentials do
      // not change which objects a URI names.
      const std::string redacted = RedactUri(source);
      const auto query = redacted.find('?');
      catalog->storage_id_ = catalog->fs_->type_name() + "|" +
                             (query == std::string::npos ? "" : redacted.substr(query + 1));
      const char* endpoint = std::getenv("AWS_ENDPOINT_URL");
      if (catalog->fs_->type_name() == "s3" && endpoint)
        catalog->storage_id_ += "|" + std::string(endpoint);
    } else if ((*maybe_fs)->type_name() != catalog->fs_->type_name()) {
      return Error(ErrorKind::kInvalidArgument, "sources must live on one filesystem: '" + raw +
                                                    "' is on " + (*maybe_fs)->type_name() +
                                                    ", the first on " + catalog->fs_->type_name());
    }
    ARROW_RETURN_NOT_OK(CheckObjectKey(*catalog->fs_, path, raw));
    auto maybe_info = FileInfoWithin(*catalog->fs_, path, options.remote_timeout);
    if (!maybe_info.ok()) return WithContext(maybe_info.status(), "source '" + raw + "'");
    const auto& info = *maybe_info;
    if (info.type() == arrow::fs::FileType::NotFound) {
      return Error(ErrorKind::kNotFound, "source '" + raw + "' does not exist");
    }
    source_paths.push_back(path);
    if (info.type() == arrow::fs::FileType::Directory) {
      single_dir = sources.size() == 1;
      ARROW_ASSIGN_OR_RAISE(auto listed_files, ListParquetFiles(*catalog->fs_, path, raw));
      const size_t found = listed_files.size();
      for (auto& child : listed_files) infos.push_back(std::move(child));
      if (found == 0) {
        return Error(ErrorKind::kNotFound, "no Parquet files (*.parquet) under '" + raw + "'");
      }
    } else {
      infos.push_back(info);
    }
  }
  if (single_dir) {
    catalog->root_ = source_paths.front();
    while (catalog->root_.size() > 1 && catalog->root_.back() == '/') catalog->root_.pop_back();
  } else {
    std::vector<std::string> dirs;
    for (const auto& info : infos) dirs.push_back(ParentDir(info.path()));
    catalog->root_ = CommonDir(dirs);
  }

  std::vector<std::pair<std::string, arrow::fs::FileInfo>> listed;
  for (auto& info : infos) listed.emplace_back(Relative(catalog->root_, info.path()), info);
  std::sort(listed.begin(), listed.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  listed.erase(std::unique(listed.begin(), listed.end(),
                           [](const auto& x, const auto& y) { return x.first == y.first; }),
               listed.end());

  // 2. Read the footers in parallel; the first error (in file order) wins.
  std::vector<arrow::Result<Footer>> footers(listed.size(), arrow::Status::Cancelled("unread"));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < listed.size(); i = next++) {
      footers[i] =
          ReadFooter(*catalog->fs_, listed[i].second, listed[i].first, options.remote_timeout);
    }
  };
  const size_t nthreads =
      std::min<size_t>(listed.size(), static_cast<size_t>(std::max(1, options.num_threads)));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();

  // 3. Build the row-group table; check that the schemas agree.
  StableHash hash;
  std::string reference_file;
  for (size_t i = 0; i < listed.size(); ++i) {
    ARROW_ASSIGN_OR_RAISE(Footer footer, std::move(footers[i]));
    const auto& rel = listed[i].first;
    if (!catalog->schema_) {
      catalog->schema_ = footer.schema;
      reference_file = rel;
    }
    if (footer.metadata->num_rows() == 0) continue;  // zero-row files are skipped
    if (catalog->num_rows_ == 0 && catalog->files_.empty()) {
      catalog->schema_ = footer.schema;
      reference_file = rel;
    } else if (!footer.schema->Equals(*catalog->schema_, /*check_metadata=*/false)) {
      return Error(ErrorKind::kSchemaMismatch,
                   "file '" + rel + "' has a schema that differs from file '" + reference_file +
                       "': " + DescribeDifference(*catalog->schema_, *footer.schema));
    }
    FileEntry entry;
    entry.path = listed[i].second.path();
    entry.rel_path = rel;
    entry.size = listed[i].second.size();
    const auto mtime = listed[i].second.mtime();
    if (mtime != arrow::fs::kNoTime) {
      entry.version = std::to_string(mtime.time_since_epoch().count());
    }
    if (catalog->is_local()) entry.identity = LocalIdentity(entry.path);
    entry.metadata = footer.metadata;
    const auto file_index = static_cast<int32_t>(catalog->files_.size());
    hash.Update(rel);
    for (int g = 0; g < footer.metadata->num_row_groups(); ++g) {
      auto rg = footer.metadata->RowGroup(g);
      if (rg->num_rows() == 0) continue;
      RowGroupEntry row_group;
      row_group.file = file_index;
      row_group.row_group = g;
      row_group.num_rows = rg->num_rows();
      row_group.first_row = catalog->num_rows_;
      row_group.total_bytes = rg->total_compressed_size();
      catalog->num_rows_ += rg->num_rows();
      catalog->row_groups_.push_back(row_group);
      hash.Update(rg->num_rows());
    }
    hash.Update("\n");
    catalog->files_.push_back(std::move(entry));
  }
  if (catalog->schema_) hash.Update(catalog->schema_->ToString());
  catalog->fingerprint_ = hash.HexDigest();
  return catalog;
}

}  // namespace shardfeed
