#include "storage/folder.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "shardfeed/status.h"

namespace shardfeed::storage_internal {

namespace {

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

arrow::Status CheckExisting(const std::string& dir, const struct stat& st,
                            const std::string& what) {
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kInvalidArgument,
                 what + " '" + dir + "' exists and is not a directory");
  }
  if (st.st_uid != ::geteuid()) {
    return Error(ErrorKind::kInvalidArgument,
                 what + " '" + dir + "' is owned by another user (uid " +
                     std::to_string(st.st_uid) + "); use a folder of your own");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Error(ErrorKind::kInvalidArgument,
                 what + " '" + dir + "' is writable by group or others (mode " +
                     ModeText(st.st_mode) + "); chmod 700 it or use another folder");
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Status MakePrivateFolder(const std::string& dir, const std::string& what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return CheckExisting(dir, st, what);
  if (errno != ENOENT) {
    return Error(ErrorKind::kStorage,
                 "cannot use " + what + " '" + dir + "': " + std::strerror(errno));
  }
  // The missing components, outermost first.
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
       !p.empty() && p != p.parent_path(); p = p.parent_path()) {
    if (p.filename().empty()) continue;  // a trailing slash
    if (::stat(p.c_str(), &st) == 0) break;
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) == 0) {
      ::chmod(it->c_str(), 0700);  // whatever the umask
    } else if (errno != EEXIST) {  // EEXIST: made meanwhile by another process
      return Error(ErrorKind::kStorage, "cannot create " + what + " '" + dir + "' (at '" +
                                            it->string() + "'): " + std::strerror(errno));
    }
  }
  if (::stat(dir.c_str(), &st) != 0) {
    return Error(ErrorKind::kStorage,
                 "cannot use " + what + " '" + dir + "': " + std::strerror(errno));
  }
  return CheckExisting(dir, st, what);
}

}  // namespace shardfeed::storage_internal
