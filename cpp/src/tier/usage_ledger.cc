#include "tier/usage_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/posix_file.h"

namespace shardfeed {
namespace {

// No folder holds more: a larger count is damage, not a count.
constexpr int64_t kMostBytes = int64_t{1} << 60;

bool ReadCount(int fd, int64_t* count) {
  uint8_t bytes[8];
  ssize_t got;
  do {
    got = ::pread(fd, bytes, sizeof(bytes), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof(bytes))) return false;
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  if (value > static_cast<uint64_t>(kMostBytes)) return false;
  *count = static_cast<int64_t>(value);
  return true;
}

bool WriteCount(int fd, int64_t count) {
  uint8_t bytes[8];
  auto value = static_cast<uint64_t>(count);
  for (auto& b : bytes) {
    b = static_cast<uint8_t>(value & 0xff);
    value >>= 8;
  }
  ssize_t put;
  do {
    put = ::pwrite(fd, bytes, sizeof(bytes), 0);
  } while (put < 0 && errno == EINTR);
  return put == static_cast<ssize_t>(sizeof(bytes));
}

bool Flock(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc == 0;
}

}  // namespace

UsageLedger::UsageLedger(const std::string& path, int64_t scanned) {
  local_ = std::clamp<int64_t>(scanned, 0, kMostBytes);
  // A folder, FIFO or link in the file's place is damage (opened under the
  // tier's exclusive creation lock: no one else makes the file meanwhile).
  storage_internal::RemoveIfNotRegular(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) return;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  Update([&](int64_t) { return local_.load(); });
}

UsageLedger::~UsageLedger() {
  if (fd_ >= 0) ::close(fd_);
}

template <typename F>
int64_t UsageLedger::Update(F change) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0 || !Flock(fd_, LOCK_EX)) {
    const int64_t next = change(local_.load());
    local_ = next;
    return next;
  }
  int64_t count = local_.load();
  // Unreadable (a short file, damage): this process's count, written back.
  const bool read = ReadCount(fd_, &count);
  const int64_t next = std::clamp<int64_t>(change(count), 0, kMostBytes);
  if (!read || next != count) WriteCount(fd_, next);
  Flock(fd_, LOCK_UN);
  local_ = next;
  return next;
}

bool UsageLedger::Reserve(int64_t bytes, int64_t limit, int64_t* seen) {
  bool fits = false;
  Update([&](int64_t count) {
    if (seen) *seen = count;
    fits = limit <= 0 || (bytes <= limit && count <= limit - bytes);
    return fits ? count + bytes : count;
  });
  return fits;
}

void UsageLedger::Release(int64_t bytes) {
  Update([&](int64_t count) { return count - std::min(count, bytes); });
}

int64_t UsageLedger::Seen() const { return local_.load(); }

int64_t UsageLedger::Count() {
  return Update([](int64_t count) { return count; });
}

}  // namespace shardfeed
