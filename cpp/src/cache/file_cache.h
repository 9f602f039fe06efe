// The machinery behind shardfeed::FileCache (see shardfeed/cache.h for the
// folder layout and the locking protocol).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/entry.h"
#include "shardfeed/cache.h"
#include "storage/posix_file.h"
#include "storage/retry.h"
#include "storage/temp_file.h"

namespace shardfeed {

struct FileCache::Impl {
  enum class Purpose { kOpen, kWarm };
  enum class Outcome {
    kCached,       // a valid entry exists (kOpen: `file` is it, pinned)
    kBusy,         // another thread or process is filling it (only with LockWait::kNoWait)
    kNoRoom,       // every entry that could make room is pinned or needed sooner
    kUncacheable,  // larger than the limit, or the folder cannot be written
  };
  struct Fetched {
    Outcome outcome = Outcome::kCached;
    std::shared_ptr<arrow::io::RandomAccessFile> file;  // kOpen: the file to read
  };

  explicit Impl(CacheOptions opts);

  // Makes sure the entry of `file` is present and valid, downloading it when
  // not.  kOpen: returns a pinned local file, or a remote one when the entry
  // cannot be cached (never kBusy or kNoRoom).  kWarm: pins nothing and evicts
  // only entries needed later than `file`.  Errors are remote failures that
  // outlasted the retries (kStorage, naming the key) or Cancelled.
  arrow::Result<Fetched> Fetch(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                               const RemoteFileInfo& file, Purpose purpose,
                               storage_internal::LockWait fill_wait,
                               const storage_internal::Interrupt* interrupt,
                               const std::atomic<bool>* stop = nullptr);

  // Removes downloads of dead processes; evicts down to the limit.
  arrow::Status Init();
  arrow::Result<CacheUsage> Usage();
  arrow::Result<int64_t> Clear();
  int64_t NextUse(const std::string& key);

  // --- below: used by the above ---
  struct ScanEntry {
    std::string name;
    int64_t bytes = 0;
    int64_t next_use = 0;
  };
  struct Scan {
    std::vector<ScanEntry> entries;
    int64_t bytes = 0;  // entries plus live downloads
  };
  // Two locked temporary files (storage/temp_file.h): the data being
  // downloaded and its metadata.  Removed on destruction unless committed.
  struct Temp {
    storage_internal::TempFile data, meta;
  };

  std::string PathOf(const std::string& name, const char* suffix) const;
  // A pinned, validated entry, or an invalid Fd when there is none.
  storage_internal::Fd TryPin(const std::string& name, const RemoteFileInfo& file);
  // Removes an entry that failed validation, unless someone has it pinned.
  void DropInvalid(const std::string& name);
  // Needs the folder lock.  Lists entries and live downloads; removes dead ones.
  arrow::Result<Scan> ScanLocked();
  // Needs the folder lock.  Evicts entries needed after `keep_until` (farthest
  // first) until the usage is at most `target`; returns the new usage.
  arrow::Result<int64_t> EvictLocked(Scan& scan, int64_t target, int64_t keep_until, bool count);
  // Removes an entry unless it is being filled or is pinned.
  arrow::Result<bool> TryEvict(const std::string& name);
  // Takes the folder lock, makes room and creates the temp files (the data
  // one allocated to full size, so that other processes count it).
  // nullptr: no room.
  arrow::Result<std::unique_ptr<Temp>> Reserve(const std::string& name, const RemoteFileInfo& file,
                                               Purpose purpose);
  // Downloads into `temp`, retrying remote failures; returns the checksum.
  // Sets *local_failure when writing failed (not a remote error).  Gives up
  // when no bytes arrived for options.remote_timeout (retries included),
  // setting *timed_out, and (Cancelled) when `interrupt` is requested or
  // `*stop` becomes true.
  arrow::Result<uint64_t> Download(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                   const RemoteFileInfo& file, Temp& temp,
                                   const storage_internal::Interrupt* interrupt,
                                   const std::atomic<bool>* stop, bool* local_failure,
                                   bool* timed_out);
  // fsyncs and renames the temp files into place.
  arrow::Status Commit(const std::string& name, const cache_internal::EntryMeta& meta, Temp& temp);
  // Switches to uncached reads for good, with one warning per process.
  void Degrade(const arrow::Status& why);
  static std::atomic<bool>& warned_in_process();  // tests reset it
  // A read of the remote file itself, within `seconds` (0: no deadline),
  // retries included.
  arrow::Result<Fetched> Uncached(const std::atomic<bool>* stop,
                                  const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                  const RemoteFileInfo& file, double seconds);

  CacheOptions options;
  storage_internal::RetryPolicy retry;
  std::string folder_lock_path;
  std::shared_ptr<std::atomic<int64_t>> remote_bytes;
  std::atomic<int64_t> hits{0}, misses{0}, cache_bytes{0}, evictions{0}, uncached_reads{0};
  std::atomic<int64_t> fetch_ns{0}, wait_ns{0};
  std::atomic<bool> degraded{false};

  std::mutex mu;  // guards the four below
  std::shared_ptr<const std::function<int64_t(const std::string&)>> priority;
  // Entries this process has checksummed, by name, inode, size, mtime and
  // checksum: a rewrite of the file (new inode or mtime) is checked again.
  std::unordered_set<std::string> verified;
  // Downloads that got no answer for remote_timeout (by entry name: the
  // error, when, steady ns).  For remote_timeout after one, the same file
  // fails at once: the consumer that waited for a prefetch's lock would
  // otherwise wait out a second timeout (a dead server was reported after 2-3
  // x remote_timeout).  Other failures were retried already and are tried again.
  std::unordered_map<std::string, std::pair<arrow::Status, int64_t>> failed;
  // Entries whose filler (another process) held its lock past remote_timeout:
  // while it still holds it, their reads go to the remote at once rather than
  // each waiting out the timeout again.
  std::unordered_set<std::string> stalled;
  arrow::Status RecentFailure(const std::string& name);
  void NoteFailure(const std::string& name, const arrow::Status& status);
};

}  // namespace shardfeed
