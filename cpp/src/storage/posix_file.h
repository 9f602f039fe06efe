// File descriptors, flock(2) locks and small POSIX helpers for the cache folder.
//
// flock locks belong to an open file description, so two opens of one file
// conflict even inside one process: threads and processes follow the same
// rules.  A lock dies with its process, so a crash leaves nothing locked.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <arrow/result.h>
#include <arrow/status.h>

namespace shardfeed::storage_internal {

// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset();

 private:
  int fd_ = -1;
};

enum class LockMode { kShared, kExclusive };
enum class LockWait { kNoWait, kWait };
enum class LockOutcome { kLocked, kBusy, kMissing };

struct LockedFd {
  Fd fd;  // valid only when outcome == kLocked
  LockOutcome outcome = LockOutcome::kMissing;
  double waited_seconds = 0;  // time spent blocked on a lock held elsewhere
};

// Opens `path` with `open_flags` (O_CLOEXEC is added; with O_CREAT the mode is
// 0600) and locks it.  After locking it checks that `path` still names the
// locked inode, and starts over if the file was replaced or removed meanwhile,
// so callers may unlink a file while they hold its exclusive lock.
// kBusy: held elsewhere (kNoWait only).  kMissing: no such file (no O_CREAT).
arrow::Result<LockedFd> OpenLocked(const std::string& path, int open_flags, LockMode mode,
                                   LockWait wait);

// OpenLocked(kWait) whose wait has an end: it polls, and gives up (kBusy)
// after `max_seconds` (> 0; otherwise no bound) or soon after `stopped()`
// (when given) turns true.  A lock held by a process that is stopped
// (SIGSTOP, a suspended job) or hung would otherwise keep the waiter, and its
// Ctrl-C, for good.  Between tries it sleeps (1 ms, doubling up to 20), or
// runs `help()` when given: other work of the caller's, true when it did some
// (the lock is then tried again at once).
arrow::Result<LockedFd> OpenLockedWithin(const std::string& path, int open_flags, LockMode mode,
                                         double max_seconds, const std::function<bool()>& stopped,
                                         const std::function<bool()>& help = {});

// An IOError naming `what` and the errno text; errno is kept in the detail.
arrow::Status ErrnoError(int errnum, const std::string& what);

// The whole of a small file (entry metadata); nullopt if unreadable or > 1 MiB.
std::optional<std::string> ReadSmallFile(const std::string& path);

arrow::Status WriteAllAt(int fd, const uint8_t* data, int64_t size, int64_t offset,
                         const std::string& path);

// Allocates `size` bytes for the file now: a full disk shows up here, before
// any download, and other processes see the reserved size when they scan.
arrow::Status Allocate(int fd, int64_t size, const std::string& path);

// unlink(2), ignoring errors (the file may be gone already).
void RemoveQuietly(const std::string& path);

// A cache folder holds regular files only: a folder, FIFO, socket or link put
// where one of its files belongs is damage.  Removes it (a folder with what is
// in it, a link itself) and returns true; false when `path` is a regular file,
// absent, or could not be removed.
bool RemoveIfNotRegular(const std::string& path);

}  // namespace shardfeed::storage_internal
