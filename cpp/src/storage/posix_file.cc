#include "storage/posix_file.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arrow/util/io_util.h>

#include "shardfeed/status.h"

namespace shardfeed::storage_internal {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

int Fd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

arrow::Status ErrnoError(int errnum, const std::string& what) {
  return arrow::internal::IOErrorFromErrno(errnum, what, ": ",
                                           arrow::internal::ErrnoMessage(errnum));
}

namespace {

// A regular file (not a FIFO, device or folder someone put in its place), made
// blocking again for what follows.
arrow::Status CheckRegular(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat '" + path + "'");
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kStorage, "'" + path + "' is not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoError(errno, "cannot set up '" + path + "'");
  }
  return arrow::Status::OK();
}

int Flock(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

arrow::Result<LockedFd> OpenLocked(const std::string& path, int open_flags, LockMode mode,
                                   LockWait wait) {
  const int op = mode == LockMode::kShared ? LOCK_SH : LOCK_EX;
  LockedFd out;
  // Each pass loses only to an unlink or rename that happened between open
  // and flock, so this ends as soon as the file stops changing.
  for (;;) {
    // Not blocking: a FIFO put where a cache file belongs would hang open()
    // until a writer came; it is refused below instead.
    Fd fd(::open(path.c_str(), open_flags | O_CLOEXEC | O_NONBLOCK, 0600));
    if (!fd.valid()) {
      if (errno == ENOENT && !(open_flags & O_CREAT)) {
        out.outcome = LockOutcome::kMissing;
        return out;
      }
      return ErrnoError(errno, "cannot open '" + path + "'");
    }
    ARROW_RETURN_NOT_OK(CheckRegular(fd.get(), path));
    // A lock file we create is 0600 whatever the umask (others' chmod fails: fine).
    if (open_flags & O_CREAT) ::fchmod(fd.get(), 0600);
    if (Flock(fd.get(), op | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return ErrnoError(errno, "cannot lock '" + path + "'");
      if (wait == LockWait::kNoWait) {
        out.outcome = LockOutcome::kBusy;
        return out;
      }
      const auto start = std::chrono::steady_clock::now();
      if (Flock(fd.get(), op) != 0) return ErrnoError(errno, "cannot lock '" + path + "'");
      out.waited_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    struct stat locked, named;
    if (::fstat(fd.get(), &locked) != 0) return ErrnoError(errno, "cannot stat '" + path + "'");
    if (::stat(path.c_str(), &named) != 0) {
      if (errno != ENOENT) return ErrnoError(errno, "cannot stat '" + path + "'");
      if (!(open_flags & O_CREAT)) {
        out.outcome = LockOutcome::kMissing;
        return out;
      }
      continue;  // removed while we waited: create it again
    }
    if (locked.st_ino == named.st_ino && locked.st_dev == named.st_dev) {
      out.fd = std::move(fd);
      out.outcome = LockOutcome::kLocked;
      return out;
    }
  }
}

arrow::Result<LockedFd> OpenLockedWithin(const std::string& path, int open_flags, LockMode mode,
                                         double max_seconds, const std::function<bool()>& stopped,
                                         const std::function<bool()>& help) {
  const auto start = std::chrono::steady_clock::now();
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    ARROW_ASSIGN_OR_RAISE(LockedFd out, OpenLocked(path, open_flags, mode, LockWait::kNoWait));
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    out.waited_seconds = waited.count();
    if (out.outcome != LockOutcome::kBusy) return out;
    if ((stopped && stopped()) || (max_seconds > 0 && waited.count() >= max_seconds)) return out;
    if (help && help()) {
      delay = std::chrono::milliseconds(1);
      continue;
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(20));
  }
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid() || !CheckRegular(fd.get(), path).ok()) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return std::nullopt;
    if (got == 0) return text;
    text.append(buf, static_cast<size_t>(got));
    if (text.size() > (1 << 20)) return std::nullopt;  // not ours
  }
}

arrow::Status WriteAllAt(int fd, const uint8_t* data, int64_t size, int64_t offset,
                         const std::string& path) {
  while (size > 0) {
    const ssize_t put = ::pwrite(fd, data, static_cast<size_t>(size), offset);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return ErrnoError(errno, "cannot write '" + path + "'");
    data += put;
    size -= put;
    offset += put;
  }
  return arrow::Status::OK();
}

arrow::Status Allocate(int fd, int64_t size, const std::string& path) {
  if (size == 0) return arrow::Status::OK();
  const int rc = ::posix_fallocate(fd, 0, size);
  if (rc == 0) return arrow::Status::OK();
  if (rc == EOPNOTSUPP || rc == EINVAL || rc == ENOSYS) {
    // A filesystem without fallocate: a sparse file still shows the size.
    if (::ftruncate(fd, size) == 0) return arrow::Status::OK();
    return ErrnoError(errno, "cannot size '" + path + "'");
  }
  return ErrnoError(rc, "cannot allocate " + std::to_string(size) + " bytes for '" + path + "'");
}

void RemoveQuietly(const std::string& path) { ::unlink(path.c_str()); }

bool RemoveIfNotRegular(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return false;
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return !ec && ::lstat(path.c_str(), &st) != 0;  // false if it could not go
}

}  // namespace shardfeed::storage_internal
