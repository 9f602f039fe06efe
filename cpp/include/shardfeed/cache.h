// The node-local cache of remote files, shared by every process on the node.
//
// A FileCache keeps whole copies of remote files (S3, GCS, HDFS, or any Arrow
// filesystem) in one local folder.  Many processes (ranks, DataLoader workers)
// may open the same folder at once: each remote file is downloaded once per
// node, entries are validated before they are served, and the folder stays
// under a byte limit by evicting the entry whose next use is farthest away.
//
// Folder layout (all names are fixed-length hex, so no key can name a path
// outside the folder):
//   <h>.data            the bytes of the remote file whose key hashes to <h>
//   <h>.meta            key=value text: key, size, version, xxh3 checksum
//   <h>.lock            flock target that serializes filling/evicting <h>
//   shardfeed.lock      flock target that serializes space accounting
//   .tmp-<h>-<pid>-...  a download in progress (locked by its writer)
//
// Cross-process protocol (all locks are flock(2), so a dead process holds none):
//   - pin: a shared lock on the fd of <h>.data; the file returned by OpenFile
//     owns that fd, so the entry is pinned exactly as long as the file lives.
//   - fill: an exclusive lock on <h>.lock while downloading or replacing <h>;
//     a second process blocks on it, then finds the entry filled and uses it.
//   - evict: under shardfeed.lock, non-blocking exclusive locks on <h>.lock and
//     on <h>.data; either one busy means "in use", and the entry is skipped.
//   - temp files are created under shardfeed.lock and stay exclusively locked
//     by their writer; a temp whose lock can be taken belongs to a dead
//     process and is removed.  Temps are never served.
// Every lock is re-checked after it is taken (the path must still name the
// locked inode), so unlinking a locked file is safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

namespace shardfeed {

struct CacheOptions {
  std::string dir;          // created with mode 0700 when missing
  int64_t limit_bytes = 0;  // 0: unlimited.  Every process on a folder should use the same.
  int max_retries = 5;      // retries of a failed remote read (so max_retries + 1 attempts)
  double retry_base_seconds = 0.05;  // first backoff; doubles per retry, with jitter

  // Range checks of the limits (not of `dir`), the only place they are made;
  // the Python layer calls it before anything is opened.
  arrow::Status Validate() const;
};

struct RemoteFileInfo {
  std::string key;      // stable identity: CacheKey(catalog, file) (shardfeed/catalog.h)
  std::string path;     // path on the filesystem (what OpenInputStream takes)
  int64_t size = 0;     // expected size in bytes
  std::string version;  // e.g. mtime in ns as text; empty: unknown (not compared)
};

struct CacheStats {
  int64_t remote_bytes = 0;    // bytes read from remote filesystems (all attempts)
  int64_t cache_hits = 0;      // OpenFile served from a valid entry
  int64_t cache_misses = 0;    // OpenFile found no valid entry (downloaded or uncached)
  int64_t cache_bytes = 0;     // bytes in the folder (entries + downloads), as of the last scan
  int64_t evictions = 0;       // entries this process removed to make room
  int64_t uncached_reads = 0;  // OpenFile served straight from the remote filesystem
  double fetch_seconds = 0;    // time spent downloading (this process, all threads)
  double prefetch_wait_seconds = 0;  // OpenFile waiting for a download already in progress
};

struct CacheUsage {
  int64_t entries = 0;  // complete entries (<h>.data files)
  int64_t bytes = 0;    // their bytes plus downloads in progress
};

class Prefetcher;

class FileCache {
 public:
  // Opens (creating when missing) the cache folder.  Removes downloads left by
  // dead processes and, when the folder is over the limit, evicts down to it.
  static arrow::Result<std::shared_ptr<FileCache>> Open(const CacheOptions& options);
  ~FileCache();
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // A local, read-only file with the bytes of `file`, downloaded first when
  // the entry is missing, stale or damaged.  The returned file pins the entry
  // until it is closed or destroyed.  When the entry cannot be cached (the file
  // is larger than the limit, every other entry is pinned, the disk is full),
  // the file is read straight from `fs` instead: same bytes, uncached.
  // Thread-safe.
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenFile(
      const std::shared_ptr<arrow::fs::FileSystem>& fs, const RemoteFileInfo& file);

  // Downloads `file` into the cache unless a valid entry exists; pins nothing.
  // Evicts only entries whose next use is later than this file's.  Returns
  // whether the file is cached afterwards.
  arrow::Result<bool> Warm(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                           const RemoteFileInfo& file);

  // The caller's knowledge of the future: next_use(key) is lower for keys
  // needed sooner; INT64_MAX for keys it does not know.  Called from any
  // thread while the cache holds its folder lock (other processes wait): it
  // must be quick and thread-safe, and must not call back into the cache.
  void SetPriority(std::function<int64_t(const std::string& key)> next_use);

  CacheStats stats() const;

  // Scans the folder.
  arrow::Result<CacheUsage> Usage() const;

  // Removes every entry that is not in use; returns how many bytes it freed.
  arrow::Result<int64_t> Clear();

  const CacheOptions& options() const;

  struct Impl;  // cache/file_cache.h

 private:
  friend class Prefetcher;
  explicit FileCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Downloads files into a cache ahead of the consumer, in the order of first use.
//
// One background thread fetches files[i] once the bytes of files
// (consumer, i] fit in `bytes_ahead`; the consumer reports the file it is
// using with Advance().  The prefetcher holds no pins, never waits for a
// download that another thread or process is doing (it skips that file), and
// evicts only entries needed later than the file it fetches (by the cache's
// priority).  A failed download is recorded and skipped: the consumer meets
// the error itself when it opens that file, at its own position.
class Prefetcher {
 public:
  Prefetcher(std::shared_ptr<FileCache> cache, std::shared_ptr<arrow::fs::FileSystem> fs,
             std::vector<RemoteFileInfo> files, int64_t bytes_ahead);
  ~Prefetcher();  // Stop()
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The consumer now uses files[index] (monotonic; smaller values are ignored).
  void Advance(size_t index);

  // Stops the thread (interrupting a download or a backoff) and joins it.
  void Stop();

  // A next-use function for FileCache::SetPriority from this order and the
  // consumer position: the index of a file not yet passed, else INT64_MAX.
  // It stays valid after the prefetcher is gone.
  std::function<int64_t(const std::string& key)> NextUse() const;

  // Waits until the thread has nothing to do before the consumer advances
  // (window full, no room, or the list done) or is stopped; false on timeout.
  bool WaitUntilIdle(double timeout_seconds) const;

  // How many files the thread is past (cached, skipped or failed), and the
  // first download error it met (OK if none).
  size_t done() const;
  arrow::Status first_error() const;

  struct State;  // cache/prefetcher.cc

 private:
  void Run();
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace shardfeed
