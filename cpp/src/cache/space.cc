// The folder's space: scanning it, evicting by next use, reserving room for a
// download.  Everything here that looks at more than one entry runs under the
// folder lock (shardfeed.lock) and takes every other lock without waiting, so
// it cannot deadlock with a process that holds an entry lock and waits for the
// folder lock.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <unordered_set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/file_cache.h"

namespace shardfeed {

using storage_internal::Allocate;
using storage_internal::ErrnoError;
using storage_internal::Fd;
using storage_internal::LockedFd;
using storage_internal::LockMode;
using storage_internal::LockOutcome;
using storage_internal::LockWait;
using storage_internal::OpenLocked;
using storage_internal::ReadSmallFile;
using storage_internal::RemoveQuietly;

arrow::Result<FileCache::Impl::Scan> FileCache::Impl::ScanLocked() {
  Scan scan;
  DIR* dir = ::opendir(options.dir.c_str());
  if (!dir) return ErrnoError(errno, "cannot list '" + options.dir + "'");
  std::vector<std::string> names;
  while (const dirent* ent = ::readdir(dir)) names.emplace_back(ent->d_name);
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  std::unordered_set<std::string> with_data;
  std::vector<std::string> others;
  for (const auto& n : names) {
    const std::string path = options.dir + "/" + n;
    if (storage_internal::IsTempName(n)) {
      // The folder lock is held exclusively: the temp protocol's cleaner.
      int64_t bytes = 0;
      if (storage_internal::CleanTemp(path, &bytes) == storage_internal::TempState::kInUse) {
        scan.bytes += bytes;  // a live download counts against the limit
      }
      continue;
    }
    constexpr size_t kStem = cache_internal::kEntryNameLength;
    if (n.size() != kStem + 5 || !cache_internal::IsEntryName(n.substr(0, kStem))) continue;
    const std::string stem = n.substr(0, kStem);
    const std::string suffix = n.substr(kStem);
    // Under the folder lock: a folder or FIFO in an entry's place made every
    // eviction (and `cache clear`) fail.
    if (storage_internal::RemoveIfNotRegular(path)) continue;
    if (suffix == ".data") {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;
      scan.entries.push_back({stem, st.st_size, 0});
      scan.bytes += st.st_size;
      with_data.insert(stem);
    } else if (suffix == ".lock" || suffix == ".meta") {
      others.push_back(stem);
    }
  }
  // Lock and metadata files without data: left by downloads that failed or
  // were not cached, or by a crash in the middle of an eviction.
  others.erase(std::unique(others.begin(), others.end()), others.end());
  for (const auto& stem : others) {
    if (with_data.count(stem)) continue;
    const std::string lock_path = PathOf(stem, ".lock");
    auto fill = OpenLocked(lock_path, O_RDWR | O_CREAT, LockMode::kExclusive, LockWait::kNoWait);
    if (!fill.ok() || fill->outcome != LockOutcome::kLocked) continue;  // being filled
    struct stat st;
    if (::stat(PathOf(stem, ".data").c_str(), &st) == 0) continue;  // filled meanwhile
    RemoveQuietly(PathOf(stem, ".meta"));
    RemoveQuietly(lock_path);
  }
  return scan;
}

arrow::Result<bool> FileCache::Impl::TryEvict(const std::string& name) {
  const std::string lock_path = PathOf(name, ".lock");
  ARROW_ASSIGN_OR_RAISE(LockedFd fill, OpenLocked(lock_path, O_RDWR | O_CREAT, LockMode::kExclusive,
                                                  LockWait::kNoWait));
  if (fill.outcome != LockOutcome::kLocked) return false;  // being filled
  const std::string data = PathOf(name, ".data");
  ARROW_ASSIGN_OR_RAISE(LockedFd pin,
                        OpenLocked(data, O_RDONLY, LockMode::kExclusive, LockWait::kNoWait));
  if (pin.outcome == LockOutcome::kBusy) return false;  // pinned
  RemoveQuietly(PathOf(name, ".meta"));
  if (pin.outcome == LockOutcome::kLocked) RemoveQuietly(data);
  RemoveQuietly(lock_path);  // safe: lockers re-check the path after locking
  return true;
}

arrow::Result<int64_t> FileCache::Impl::EvictLocked(Scan& scan, int64_t target, int64_t keep_until,
                                                    bool count) {
  int64_t usage = scan.bytes;
  if (usage <= target) return usage;
  for (auto& e : scan.entries) {
    auto text = ReadSmallFile(PathOf(e.name, ".meta"));
    auto meta = text ? cache_internal::ParseMeta(*text) : std::nullopt;
    // An entry without valid metadata can never be served: it goes first.
    e.next_use = meta ? NextUse(meta->key) : INT64_MAX;
  }
  std::sort(scan.entries.begin(), scan.entries.end(), [](const auto& a, const auto& b) {
    return a.next_use != b.next_use ? a.next_use > b.next_use : a.name < b.name;
  });
  for (const auto& e : scan.entries) {
    if (usage <= target || e.next_use <= keep_until) break;
    ARROW_ASSIGN_OR_RAISE(bool evicted, TryEvict(e.name));
    if (!evicted) continue;
    usage -= e.bytes;
    if (count) evictions.fetch_add(1, std::memory_order_relaxed);
  }
  return usage;
}

arrow::Result<std::unique_ptr<FileCache::Impl::Temp>> FileCache::Impl::Reserve(
    const std::string& name, const RemoteFileInfo& file, Purpose purpose) {
  ARROW_ASSIGN_OR_RAISE(LockedFd folder, OpenLocked(folder_lock_path, O_RDWR | O_CREAT,
                                                    LockMode::kExclusive, LockWait::kWait));
  ARROW_ASSIGN_OR_RAISE(Scan scan, ScanLocked());
  int64_t usage = scan.bytes;
  const int64_t limit = options.limit_bytes;
  if (limit > 0 && usage + file.size > limit) {
    // The consumer needs this file now: anything unpinned may go.  A warm-up
    // must not push out what is needed before this file.
    const int64_t keep_until = purpose == Purpose::kOpen ? INT64_MIN : NextUse(file.key);
    ARROW_ASSIGN_OR_RAISE(usage, EvictLocked(scan, limit - file.size, keep_until, true));
    if (usage + file.size > limit) {
      cache_bytes.store(usage, std::memory_order_relaxed);
      return nullptr;
    }
  }
  // Created and locked under the folder lock (held exclusively here), which is
  // this folder's temp-creation lock: a scan never finds them unlocked while
  // their writer lives.
  auto temp = std::make_unique<Temp>();
  ARROW_ASSIGN_OR_RAISE(temp->data, storage_internal::TempFile::Create(
                                        storage_internal::TempPath(options.dir, name, ".data")));
  ARROW_ASSIGN_OR_RAISE(temp->meta, storage_internal::TempFile::Create(
                                        storage_internal::TempPath(options.dir, name, ".meta")));
  ARROW_RETURN_NOT_OK(Allocate(temp->data.fd(), file.size, temp->data.path()));
  cache_bytes.store(usage + file.size, std::memory_order_relaxed);
  return temp;
}

arrow::Status FileCache::Impl::Init() {
  auto folder =
      OpenLocked(folder_lock_path, O_RDWR | O_CREAT, LockMode::kExclusive, LockWait::kWait);
  if (!folder.ok()) {
    Degrade(folder.status());
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(Scan scan, ScanLocked());
  int64_t usage = scan.bytes;
  if (options.limit_bytes > 0) {
    ARROW_ASSIGN_OR_RAISE(usage, EvictLocked(scan, options.limit_bytes, INT64_MIN, true));
  }
  cache_bytes.store(usage, std::memory_order_relaxed);
  return arrow::Status::OK();
}

arrow::Result<CacheUsage> FileCache::Impl::Usage() {
  ARROW_ASSIGN_OR_RAISE(LockedFd folder, OpenLocked(folder_lock_path, O_RDWR | O_CREAT,
                                                    LockMode::kExclusive, LockWait::kWait));
  ARROW_ASSIGN_OR_RAISE(Scan scan, ScanLocked());
  cache_bytes.store(scan.bytes, std::memory_order_relaxed);
  return CacheUsage{static_cast<int64_t>(scan.entries.size()), scan.bytes};
}

arrow::Result<int64_t> FileCache::Impl::Clear() {
  ARROW_ASSIGN_OR_RAISE(LockedFd folder, OpenLocked(folder_lock_path, O_RDWR | O_CREAT,
                                                    LockMode::kExclusive, LockWait::kWait));
  ARROW_ASSIGN_OR_RAISE(Scan scan, ScanLocked());
  const int64_t before = scan.bytes;
  ARROW_ASSIGN_OR_RAISE(int64_t after, EvictLocked(scan, 0, INT64_MIN, false));
  cache_bytes.store(after, std::memory_order_relaxed);
  return before - after;
}

}  // namespace shardfeed
