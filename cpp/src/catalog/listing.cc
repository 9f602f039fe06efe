#include "catalog/listing.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include <arrow/util/future.h>

#include "shardfeed/status.h"
#include "util/deadline_file.h"

namespace shardfeed {

namespace {

bool IsLocal(const arrow::fs::FileSystem& fs) { return fs.type_name() == "local"; }

arrow::fs::FileInfo FileInfoOf(const std::string& path, const struct stat& st) {
  arrow::fs::FileInfo info(path, arrow::fs::FileType::File);
  info.set_size(st.st_size);
  const auto ns =
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
  info.set_mtime(
      arrow::fs::TimePoint(std::chrono::duration_cast<arrow::fs::TimePoint::duration>(ns)));
  return info;
}

struct LocalWalk {
  // A folder is listed once per (identity, key=value folders on its path from
  // the walk's start): a folder reached by two paths is listed once, unless
  // the paths hold other partition keys (a partition folder linked as k=3/
  // holds rows with k=3; the catalog then reads its files under each).  A
  // link back to a folder above is a loop, never followed (each turn of it
  // would add keys).
  std::string start;
  std::vector<std::pair<dev_t, ino_t>> ancestors;
  std::set<std::tuple<dev_t, ino_t, std::string>> seen;
  std::vector<arrow::fs::FileInfo> files;

  static std::string KeysOf(std::string_view rel) {
    std::string keys;
    while (!rel.empty()) {
      const size_t slash = rel.find('/');
      const std::string_view part = rel.substr(0, slash);
      if (part.find('=') != std::string_view::npos) keys.append(part).push_back('/');
      if (slash == std::string_view::npos) break;
      rel.remove_prefix(slash + 1);
    }
    return keys;
  }

  arrow::Status Visit(const std::string& dir, const struct stat& dir_st) {
    if (ancestors.empty()) start = dir;
    const std::pair<dev_t, ino_t> id{dir_st.st_dev, dir_st.st_ino};
    if (std::find(ancestors.begin(), ancestors.end(), id) != ancestors.end()) {
      return arrow::Status::OK();
    }
    const std::string_view rel =
        dir.size() > start.size() ? std::string_view(dir).substr(start.size()) : "";
    if (!seen.emplace(id.first, id.second, KeysOf(rel)).second) return arrow::Status::OK();
    ancestors.push_back(id);
    auto status = List(dir);
    ancestors.pop_back();
    return status;
  }

  arrow::Status List(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (!d) {
      return Error(ErrorKind::kStorage, "cannot list '" + dir + "': " + std::strerror(errno));
    }
    std::vector<std::string> names;
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    // Sorted, so that which of two links to one directory is followed does not
    // depend on the order the OS lists them in.
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      const std::string path = dir == "/" ? "/" + name : dir + "/" + name;
      struct stat st;
      if (stat(path.c_str(), &st) != 0) continue;  // a dangling link: nothing to read
      if (S_ISDIR(st.st_mode)) {
        ARROW_RETURN_NOT_OK(Visit(path, st));
      } else if (S_ISREG(st.st_mode)) {
        files.push_back(FileInfoOf(path, st));
      }
    }
    return arrow::Status::OK();
  }
};

}  // namespace

arrow::Result<std::vector<arrow::fs::FileInfo>> ListWithin(arrow::fs::FileSystem& fs,
                                                           const arrow::fs::FileSelector& selector,
                                                           double remote_timeout) {
  // Only Arrow's S3 filesystem lists in pages; elsewhere the generator is the
  // whole listing at once, which may rightly take longer than any one request.
  if (fs.type_name() != "s3" || remote_timeout <= 0) return fs.GetFileInfo(selector);
  using Page = std::vector<arrow::fs::FileInfo>;
  // Owned by each page's call, which may outlive this one (abandoned at its deadline).
  auto keep = fs.shared_from_this();
  auto pages = std::make_shared<arrow::fs::FileInfoGenerator>(keep->GetFileInfoGenerator(selector));
  Page out;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(
        Page page,
        CallBefore<Page>([keep, pages]() -> arrow::Result<Page> { return (*pages)().result(); },
                         DeadlineAfter(remote_timeout), remote_timeout, nullptr));
    if (page.empty()) return out;  // the generator's end
    for (auto& info : page) out.push_back(std::move(info));
  }
}

arrow::Result<std::vector<arrow::fs::FileInfo>> ListFiles(arrow::fs::FileSystem& fs,
                                                          const std::string& dir,
                                                          const std::string& shown,
                                                          double remote_timeout) {
  if (IsLocal(fs)) {
    std::string root = dir;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    struct stat st;
    if (stat(root.c_str(), &st) != 0) {
      return Error(ErrorKind::kStorage,
                   "listing '" + shown + "': " + std::string(std::strerror(errno)));
    }
    LocalWalk walk;
    ARROW_RETURN_NOT_OK(WithContext(walk.Visit(root, st), "listing '" + shown + "'"));
    return std::move(walk.files);
  }
  arrow::fs::FileSelector selector;
  selector.base_dir = dir;
  selector.recursive = true;
  auto maybe_list = ListWithin(fs, selector, remote_timeout);
  if (!maybe_list.ok()) return WithContext(maybe_list.status(), "listing '" + shown + "'");
  std::vector<arrow::fs::FileInfo> files;
  for (auto& child : *maybe_list) {
    if (child.IsFile()) files.push_back(std::move(child));
  }
  return files;
}

arrow::Status CheckObjectKey(const arrow::fs::FileSystem& fs, const std::string& path,
                             const std::string& shown) {
  if (IsLocal(fs)) return arrow::Status::OK();
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + begin, end - begin);
    if (part == "." || part == "..") {
      return Error(ErrorKind::kInvalidArgument,
                   "object key '" + shown + "' has a '" + std::string(part) +
                       "' component: object stores would read another key's bytes under this "
                       "name; rename the object");
    }
    begin = end + 1;
  }
  return arrow::Status::OK();
}

}  // namespace shardfeed
