// The temp-file protocol that both cache tiers (the file cache and the
// decoded tier) follow in a folder that many processes share.
//
//   write:  under the folder's creation lock (shared among writers), create
//           ".tmp-..." with O_EXCL, mode 0600, and take an exclusive flock on
//           it; release the creation lock; write; rename to commit.  The
//           writer keeps the flock until it is done with the file.
//   clean:  under the creation lock held exclusively, a ".tmp-..." file whose
//           flock can be taken without waiting has no live writer (flock(2)
//           locks die with their process) and is removed; a busy one is in
//           progress and is left alone.
//
// flock, not "is the pid in its name alive": processes in different PID
// namespaces (containers on one node) share a cache folder, and there a pid
// names another process or none.  The creation lock closes the window
// between a writer's open and its flock, in which a cleaner would otherwise
// see an unlocked, fresh temp file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <arrow/result.h>
#include <arrow/status.h>

#include "storage/posix_file.h"

namespace shardfeed::storage_internal {

inline constexpr std::string_view kTempPrefix = ".tmp-";

inline bool IsTempName(std::string_view name) { return name.substr(0, 5) == kTempPrefix; }

// "<dir>/.tmp-<tag>-<random>-<counter><suffix>": unique without relying on pids.
std::string TempPath(const std::string& dir, const std::string& tag, const std::string& suffix);

// The creation lock of `dir` ("<dir>/<lock_name>"): kShared to create temps,
// kExclusive to clean them.  The file cache passes its folder lock, which it
// takes exclusively for space accounting anyway.
arrow::Result<LockedFd> LockTempCreation(const std::string& lock_path, LockMode mode);

// A temp file being written, exclusively flocked; removed on destruction
// unless committed.  Needs the creation lock while it is created.
class TempFile {
 public:
  static arrow::Result<TempFile> Create(const std::string& path);
  TempFile() = default;
  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) noexcept;
  ~TempFile();

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  bool committed() const { return committed_; }
  // Renames the file to `final_path`; the flock stays until Close().
  arrow::Status Commit(const std::string& final_path);
  // Drops the lock (and the file, unless committed).
  void Close();

 private:
  std::string path_;
  Fd fd_;
  bool committed_ = false;
};

enum class TempState { kRemoved, kInUse, kGone };

// Needs the creation lock held exclusively.  Removes temp `path` when its
// writer is gone; kInUse (with its size in *bytes, if given) when it is live.
TempState CleanTemp(const std::string& path, int64_t* bytes = nullptr);

}  // namespace shardfeed::storage_internal
