#include "catalog/file_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shardfeed/status.h"
#include "util/deadline_file.h"
#include "util/file_identity.h"

namespace shardfeed {

namespace {

int64_t Ns(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000LL + static_cast<int64_t>(t.tv_nsec);
}

arrow::Status Changed(const std::string& what) {
  return Error(ErrorKind::kInvalidData,
               "the file changed since the dataset was opened (" + what +
                   "); rows of two versions are never mixed: open the dataset again");
}

}  // namespace

arrow::Status CheckUnchanged(arrow::fs::FileSystem& fs, const FileEntry& file,
                             double timeout_seconds, const StopCheck& stopped) {
  if (fs.type_name() == "local") {
    struct stat st;
    if (stat(file.path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Changed("it was removed");
      return Error(ErrorKind::kStorage, std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      return Changed(S_ISDIR(st.st_mode) ? "it is now a folder" : "it is no longer a regular file");
    }
    if (st.st_size != file.size) {
      return Changed("size " + std::to_string(file.size) + " -> " + std::to_string(st.st_size) +
                     " bytes");
    }
    if (!file.version.empty() && std::to_string(Ns(st.st_mtim)) != file.version) {
      return Changed("modification time");
    }
    if (!file.identity.empty() && StatIdentity(st) != file.identity) {
      return Changed("rewritten in place or replaced");
    }
    return arrow::Status::OK();
  }
  return CheckRemoteUnchanged(fs, file.path, file.size, file.version, timeout_seconds, stopped);
}

arrow::Status CheckRemoteUnchanged(arrow::fs::FileSystem& fs, const std::string& path, int64_t size,
                                   const std::string& version, double timeout_seconds,
                                   const StopCheck& stopped, double setting_seconds) {
  auto maybe_info = FileInfoWithin(fs, path, timeout_seconds, stopped, setting_seconds);
  if (!maybe_info.ok()) return maybe_info.status();
  const auto& info = *maybe_info;
  if (info.type() == arrow::fs::FileType::NotFound) return Changed("it was removed");
  if (info.size() != size) {
    return Changed("size " + std::to_string(size) + " -> " + std::to_string(info.size()) +
                   " bytes");
  }
  if (!version.empty() && info.mtime() != arrow::fs::kNoTime) {
    using std::chrono::duration_cast;
    using std::chrono::seconds;
    const int64_t then = std::strtoll(version.c_str(), nullptr, 10) / 1000000000LL;
    const int64_t now = duration_cast<seconds>(info.mtime().time_since_epoch()).count();
    if (then != now) return Changed("modification time");
  }
  return arrow::Status::OK();
}

arrow::Result<arrow::fs::FileInfo> FileInfoWithin(arrow::fs::FileSystem& fs,
                                                  const std::string& path, double timeout_seconds,
                                                  const StopCheck& stopped,
                                                  double setting_seconds) {
  if (fs.type_name() == "local" || (timeout_seconds <= 0 && !stopped)) {
    return fs.GetFileInfo(path);
  }
  // On a thread of our own: GetFileInfoAsync is synchronous on several
  // filesystems (GCS: a silent network meant minutes of client retries).
  return CallBefore<arrow::fs::FileInfo>(
      [keep = fs.shared_from_this(), path] { return keep->GetFileInfo(path); },
      DeadlineAfter(timeout_seconds), setting_seconds > 0 ? setting_seconds : timeout_seconds,
      stopped);
}

}  // namespace shardfeed
