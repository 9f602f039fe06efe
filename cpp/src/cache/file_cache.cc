#include "cache/file_cache.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arrow/io/file.h>

#include "shardfeed/status.h"
#include "storage/folder.h"
#include "util/deadline_file.h"
#include "util/file_identity.h"
#include "util/number_text.h"

namespace shardfeed {

using cache_internal::EntryMeta;
using storage_internal::ErrnoError;
using storage_internal::Fd;
using storage_internal::LockedFd;
using storage_internal::LockMode;
using storage_internal::LockOutcome;
using storage_internal::LockWait;
using storage_internal::OpenLocked;
using storage_internal::ReadSmallFile;
using storage_internal::RemoveQuietly;

namespace {

// What identifies one checksummed version of an entry's data file.  The
// change time too: a write in place with the modification time set back
// (touch -d, cp -p) still moves it.
std::string VerifiedKey(const std::string& name, const struct stat& st, uint64_t checksum) {
  return name + ":" + StatIdentity(st) + ":" + std::to_string(checksum);
}

}  // namespace

// ---------------------------------------------------------------- Impl ---

FileCache::Impl::Impl(CacheOptions opts)
    : options(std::move(opts)), remote_bytes(std::make_shared<std::atomic<int64_t>>(0)) {
  retry.max_retries = std::max(0, options.max_retries);
  retry.base_seconds = std::max(0.0, options.retry_base_seconds);
  folder_lock_path = options.dir + "/shardfeed.lock";
}

std::string FileCache::Impl::PathOf(const std::string& name, const char* suffix) const {
  return options.dir + "/" + name + suffix;
}

int64_t FileCache::Impl::NextUse(const std::string& key) {
  std::shared_ptr<const std::function<int64_t(const std::string&)>> fn;
  {
    std::lock_guard<std::mutex> lock(mu);
    fn = priority;
  }
  return fn && *fn ? (*fn)(key) : INT64_MAX;
}

std::atomic<bool>& FileCache::Impl::warned_in_process() {
  static std::atomic<bool> warned{false};
  return warned;
}

void FileCache::Impl::Degrade(const arrow::Status& why) {
  if (degraded.exchange(true)) return;
  if (warned_in_process().exchange(true)) return;
  std::fprintf(stderr,
               "shardfeed: warning: cannot write to the cache folder '%s' (%s); files already "
               "in it are still read from it, others from the remote store without caching\n",
               options.dir.c_str(), why.message().c_str());
}

arrow::Result<FileCache::Impl::Fetched> FileCache::Impl::Uncached(
    const std::atomic<bool>* stop, const std::shared_ptr<arrow::fs::FileSystem>& fs,
    const RemoteFileInfo& file, double seconds) {
  uncached_reads.fetch_add(1, std::memory_order_relaxed);
  Fetched out;
  out.outcome = Outcome::kUncacheable;
  storage_internal::RetryPolicy policy = retry;
  policy.deadline = DeadlineAfter(seconds);
  ARROW_ASSIGN_OR_RAISE(
      auto remote, storage_internal::RemoteFile::Open(fs, file.path, file.size,
                                                      storage_internal::RemoteName(*fs, file.path),
                                                      policy, remote_bytes));
  // The same deadline as an uncached read without a cache: per opening (one
  // row group's reads), retries included.
  out.file = WithDeadline(std::move(remote), seconds, stop, options.remote_timeout);
  return out;
}

Fd FileCache::Impl::TryPin(const std::string& name, const RemoteFileInfo& file) {
  auto locked = OpenLocked(PathOf(name, ".data"), O_RDONLY, LockMode::kShared, LockWait::kWait);
  if (!locked.ok() || locked->outcome != LockOutcome::kLocked) return Fd();
  Fd fd = std::move(locked->fd);
  auto text = ReadSmallFile(PathOf(name, ".meta"));
  if (!text) return Fd();
  auto meta = cache_internal::ParseMeta(*text);
  if (!meta || meta->key != file.key || meta->size != file.size ||
      (!file.version.empty() && meta->version != file.version)) {
    return Fd();
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || st.st_size != meta->size) return Fd();
  const std::string seen = VerifiedKey(name, st, meta->checksum);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (verified.count(seen)) return fd;
  }
  auto checksum = cache_internal::ChecksumOfFd(fd.get(), meta->size);
  if (!checksum.ok() || *checksum != meta->checksum) return Fd();
  std::lock_guard<std::mutex> lock(mu);
  verified.insert(seen);
  return fd;
}

void FileCache::Impl::DropInvalid(const std::string& name) {
  const std::string data = PathOf(name, ".data");
  auto locked = OpenLocked(data, O_RDONLY, LockMode::kExclusive, LockWait::kNoWait);
  if (!locked.ok() || locked->outcome == LockOutcome::kBusy) return;  // pinned: replaced later
  RemoveQuietly(PathOf(name, ".meta"));
  if (locked->outcome == LockOutcome::kLocked) RemoveQuietly(data);
}

arrow::Result<FileCache::Impl::Fetched> FileCache::Impl::Fetch(
    const std::shared_ptr<arrow::fs::FileSystem>& fs, const RemoteFileInfo& file, Purpose purpose,
    LockWait fill_wait, const storage_internal::Interrupt* interrupt,
    const std::atomic<bool>* stop) {
  const bool open = purpose == Purpose::kOpen;
  const std::string name = cache_internal::EntryName(file.key);
  // One remote_timeout for the whole fetch: a read that waited for another
  // process's download and then goes to the store itself has what is left.
  const double timeout = options.remote_timeout;
  const auto started = std::chrono::steady_clock::now();
  auto time_left = [&] {
    if (timeout <= 0) return 0.0;  // no deadline
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return std::max(timeout - spent, 0.001);
  };
  auto serve = [&](Fd pin) -> arrow::Result<Fetched> {
    Fetched out;
    if (!open) return out;
    hits.fetch_add(1, std::memory_order_relaxed);
    ARROW_ASSIGN_OR_RAISE(out.file, arrow::io::ReadableFile::Open(pin.Release()));
    return out;
  };
  auto give_up = [&](Outcome outcome) -> arrow::Result<Fetched> {
    if (open) return Uncached(stop, fs, file, time_left());
    Fetched out;
    out.outcome = outcome;
    return out;
  };

  // 1. A valid entry: pin it and go.
  if (Fd pin = TryPin(name, file); pin.valid()) return serve(std::move(pin));
  if (degraded.load()) {
    if (open) misses.fetch_add(1, std::memory_order_relaxed);
    return give_up(Outcome::kUncacheable);
  }

  // 2. Become the one that fills it; whoever filled it before us wins.  A
  // filler that makes no end (a stopped or hung process on the node) is waited
  // for half of remote_timeout at most: then this read goes to the remote
  // itself, with the rest.
  bool stalled_before = false;
  if (fill_wait == LockWait::kWait) {
    std::lock_guard<std::mutex> lock(mu);
    stalled_before = stalled.count(name) > 0;
  }
  auto fill = fill_wait == LockWait::kNoWait || stalled_before
                  ? OpenLocked(PathOf(name, ".lock"), O_RDWR | O_CREAT, LockMode::kExclusive,
                               LockWait::kNoWait)
                  : storage_internal::OpenLockedWithin(
                        PathOf(name, ".lock"), O_RDWR | O_CREAT, LockMode::kExclusive, timeout / 2,
                        [stop] { return stop != nullptr && stop->load(); });
  if (fill.ok() && fill_wait == LockWait::kWait) {
    std::lock_guard<std::mutex> lock(mu);
    if (fill->outcome == LockOutcome::kBusy) {
      stalled.insert(name);
    } else {
      stalled.erase(name);
    }
  }
  if (!fill.ok()) {
    Degrade(fill.status());
    if (open) misses.fetch_add(1, std::memory_order_relaxed);
    return give_up(Outcome::kUncacheable);
  }
  if (fill->outcome == LockOutcome::kBusy) return give_up(Outcome::kBusy);
  if (open) {
    wait_ns.fetch_add(static_cast<int64_t>(fill->waited_seconds * 1e9), std::memory_order_relaxed);
  }
  if (Fd pin = TryPin(name, file); pin.valid()) return serve(std::move(pin));
  if (open) misses.fetch_add(1, std::memory_order_relaxed);
  ARROW_RETURN_NOT_OK(RecentFailure(name));
  DropInvalid(name);

  // 3. Room, a download into a temp file, and the rename into place.
  if (options.limit_bytes > 0 && file.size > options.limit_bytes) {
    return give_up(Outcome::kUncacheable);
  }
  auto reserved = Reserve(name, file, purpose);
  if (!reserved.ok()) {
    Degrade(reserved.status());
    return give_up(Outcome::kUncacheable);
  }
  if (*reserved == nullptr) return give_up(Outcome::kNoRoom);
  Temp& temp = **reserved;
  bool local_failure = false, timed_out = false;
  auto checksum = Download(fs, file, temp, interrupt, stop, &local_failure, &timed_out);
  if (!checksum.ok()) {
    if (!local_failure) {
      if (timed_out) NoteFailure(name, checksum.status());
      return checksum.status();
    }
    Degrade(checksum.status());
    return give_up(Outcome::kUncacheable);
  }
  EntryMeta meta{file.key, file.size, file.version, *checksum};
  if (auto st = Commit(name, meta, temp); !st.ok()) {
    Degrade(st);
    return give_up(Outcome::kUncacheable);
  }
  temp.data.Close();  // drops the writer's lock on what is now <name>.data
  temp.meta.Close();
  if (!open) return Fetched{};
  // We computed the checksum while writing: no need to read it back.
  if (struct stat st; ::stat(PathOf(name, ".data").c_str(), &st) == 0) {
    std::lock_guard<std::mutex> lock(mu);
    verified.insert(VerifiedKey(name, st, *checksum));
  }
  Fd pin = TryPin(name, file);
  if (!pin.valid()) return give_up(Outcome::kUncacheable);  // cannot happen: we hold the fill lock
  Fetched out;
  ARROW_ASSIGN_OR_RAISE(out.file, arrow::io::ReadableFile::Open(pin.Release()));
  return out;
}

arrow::Status FileCache::Impl::RecentFailure(const std::string& name) {
  if (!(options.remote_timeout > 0)) return arrow::Status::OK();
  std::lock_guard<std::mutex> lock(mu);
  const auto it = failed.find(name);
  if (it == failed.end()) return arrow::Status::OK();
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const int64_t age =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - it->second.second;
  if (static_cast<double>(age) >= options.remote_timeout * 1e9) {
    failed.erase(it);  // long enough ago: the storage may answer again
    return arrow::Status::OK();
  }
  // Said as what it is: no request was made now (every reader of a stalled
  // object would otherwise wait out remote_timeout again, one after another).
  const auto seconds = static_cast<int64_t>(static_cast<double>(age) / 1e9);
  const auto again = static_cast<int64_t>(options.remote_timeout - static_cast<double>(age) / 1e9);
  return it->second.first.WithMessage(
      it->second.first.message(), " (not requested again: the download failed so ", seconds,
      " s ago; it is tried again in ", again + 1, " s, or at once by a new process)");
}

void FileCache::Impl::NoteFailure(const std::string& name, const arrow::Status& status) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  std::lock_guard<std::mutex> lock(mu);
  failed[name] = {status, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()};
}

// ----------------------------------------------------------- FileCache ---

arrow::Status CacheOptions::Validate() const {
  if (limit_bytes < 0) {
    return Error(
        ErrorKind::kInvalidArgument,
        "cache_limit_bytes must be >= 0 (0: unlimited), got " + std::to_string(limit_bytes));
  }
  if (max_retries < 0 || !(retry_base_seconds >= 0)) {
    return Error(ErrorKind::kInvalidArgument, "retry settings must be >= 0");
  }
  if (!(remote_timeout >= 0)) {  // NaN too
    return Error(
        ErrorKind::kInvalidArgument,
        "remote_timeout must be >= 0 seconds (0: none), got " + NumberText(remote_timeout));
  }
  return arrow::Status::OK();
}

FileCache::FileCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FileCache::~FileCache() = default;

arrow::Result<std::shared_ptr<FileCache>> FileCache::Open(const CacheOptions& options) {
  if (options.dir.empty()) return Error(ErrorKind::kInvalidArgument, "cache_dir is empty");
  ARROW_RETURN_NOT_OK(options.Validate());
  ARROW_RETURN_NOT_OK(storage_internal::MakePrivateFolder(options.dir, "cache folder"));
  auto impl = std::make_unique<Impl>(options);
  auto st = impl->Init();
  if (!st.ok()) return WithContext(st, "cache folder '" + options.dir + "'");
  return std::shared_ptr<FileCache>(new FileCache(std::move(impl)));
}

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> FileCache::OpenFile(
    const std::shared_ptr<arrow::fs::FileSystem>& fs, const RemoteFileInfo& file,
    const std::atomic<bool>* stop) {
  ARROW_ASSIGN_OR_RAISE(
      auto fetched, impl_->Fetch(fs, file, Impl::Purpose::kOpen, LockWait::kWait, nullptr, stop));
  return fetched.file;
}

arrow::Result<bool> FileCache::Warm(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                    const RemoteFileInfo& file) {
  ARROW_ASSIGN_OR_RAISE(auto fetched,
                        impl_->Fetch(fs, file, Impl::Purpose::kWarm, LockWait::kWait, nullptr));
  return fetched.outcome == Impl::Outcome::kCached;
}

void FileCache::SetPriority(std::function<int64_t(const std::string& key)> next_use) {
  auto fn = std::make_shared<const std::function<int64_t(const std::string&)>>(std::move(next_use));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->priority = std::move(fn);
}

CacheStats FileCache::stats() const {
  CacheStats s;
  s.remote_bytes = impl_->remote_bytes->load(std::memory_order_relaxed);
  s.cache_hits = impl_->hits.load(std::memory_order_relaxed);
  s.cache_misses = impl_->misses.load(std::memory_order_relaxed);
  s.cache_bytes = impl_->cache_bytes.load(std::memory_order_relaxed);
  s.evictions = impl_->evictions.load(std::memory_order_relaxed);
  s.uncached_reads = impl_->uncached_reads.load(std::memory_order_relaxed);
  s.fetch_seconds = static_cast<double>(impl_->fetch_ns.load(std::memory_order_relaxed)) * 1e-9;
  s.prefetch_wait_seconds =
      static_cast<double>(impl_->wait_ns.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

arrow::Result<CacheUsage> FileCache::Usage() const { return impl_->Usage(); }
arrow::Result<int64_t> FileCache::Clear() { return impl_->Clear(); }
const CacheOptions& FileCache::options() const { return impl_->options; }

}  // namespace shardfeed
