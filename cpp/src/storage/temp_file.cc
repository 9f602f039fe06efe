#include "storage/temp_file.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardfeed::storage_internal {

std::string TempPath(const std::string& dir, const std::string& tag, const std::string& suffix) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char random[17];
  std::snprintf(random, sizeof(random), "%016llx", static_cast<unsigned long long>(rng()));
  return dir + "/" + std::string(kTempPrefix) + tag + "-" + random + "-" +
         std::to_string(counter.fetch_add(1)) + suffix;
}

arrow::Result<LockedFd> LockTempCreation(const std::string& lock_path, LockMode mode) {
  return OpenLocked(lock_path, O_RDWR | O_CREAT, mode, LockWait::kWait);
}

arrow::Result<TempFile> TempFile::Create(const std::string& path) {
  TempFile out;
  out.fd_ = Fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out.fd_.valid()) return ErrnoError(errno, "cannot create '" + path + "'");
  out.path_ = path;
  ::fchmod(out.fd_.get(), 0600);  // whatever the umask
  if (::flock(out.fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    return ErrnoError(errno, "cannot lock '" + path + "'");
  }
  return out;
}

TempFile::TempFile(TempFile&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      fd_(std::move(other.fd_)),
      committed_(other.committed_) {}

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    fd_ = std::move(other.fd_);
    committed_ = other.committed_;
    other.path_.clear();
  }
  return *this;
}

TempFile::~TempFile() { Close(); }

arrow::Status TempFile::Commit(const std::string& final_path) {
  if (::rename(path_.c_str(), final_path.c_str()) != 0) {
    return ErrnoError(errno, "cannot rename '" + path_ + "' to '" + final_path + "'");
  }
  committed_ = true;
  return arrow::Status::OK();
}

void TempFile::Close() {
  // Unlink before unlocking: a cleaner never sees our unlocked temp.
  if (!committed_ && !path_.empty()) RemoveQuietly(path_);
  path_.clear();
  fd_.Reset();
}

TempState CleanTemp(const std::string& path, int64_t* bytes) {
  auto locked = OpenLocked(path, O_RDONLY, LockMode::kExclusive, LockWait::kNoWait);
  if (!locked.ok() || locked->outcome == LockOutcome::kMissing) return TempState::kGone;
  if (locked->outcome == LockOutcome::kLocked) {
    RemoveQuietly(path);  // its writer died (killed mid-write)
    return TempState::kRemoved;
  }
  if (bytes) {
    struct stat st;
    *bytes = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }
  return TempState::kInUse;
}

}  // namespace shardfeed::storage_internal
