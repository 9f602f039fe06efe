// Downloading an entry into its temp files and renaming them into place.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <limits>

#include <fcntl.h>
#include <unistd.h>

#include <arrow/buffer.h>
#include <arrow/util/future.h>

#include "cache/file_cache.h"
#include "catalog/file_check.h"
#include "shardfeed/status.h"
#include "util/hash.h"

namespace shardfeed {

using cache_internal::EntryMeta;
using storage_internal::ErrnoError;
using storage_internal::Fd;
using storage_internal::WriteAllAt;

namespace {

constexpr int64_t kChunkBytes = 8 << 20;  // per remote read; two in flight
constexpr double kPollSeconds = 0.05;     // how often a wait looks at stop and the deadline

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

arrow::Result<uint64_t> FileCache::Impl::Download(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                                  const RemoteFileInfo& file, Temp& temp,
                                                  const storage_internal::Interrupt* interrupt,
                                                  const std::atomic<bool>* stop,
                                                  bool* local_failure, bool* timed_out_out) {
  arrow::Status local;
  // The deadline moves with progress: a large file on a slow link is fine, a
  // server that stops sending is not.  Retries do not move it.
  const double timeout = options.remote_timeout;
  int64_t last_progress = NowNs();
  bool timed_out = false;
  auto stopped = [&] { return (interrupt && interrupt->requested()) || (stop && stop->load()); };
  auto seconds_left = [&] { return timeout - static_cast<double>(NowNs() - last_progress) / 1e9; };
  // Waits for `f` in short slices; false when stopped or out of time.
  auto wait = [&](const arrow::Future<std::shared_ptr<arrow::Buffer>>& f) {
    while (!f.Wait(kPollSeconds)) {
      if (stopped()) return false;
      if (timeout > 0 && seconds_left() <= 0) {
        timed_out = true;
        return false;
      }
    }
    return true;
  };
  auto attempt = [&]() -> arrow::Result<uint64_t> {
    if (timeout > 0 && seconds_left() <= 0) {
      timed_out = true;
      return arrow::Status::Cancelled("remote_timeout");
    }
    // The remote file must still be the one the catalog read: a rewrite
    // (same size or not) would otherwise be cached under the old version.
    ARROW_RETURN_NOT_OK(CheckRemoteUnchanged(*fs, file.path, file.size, file.version,
                                             timeout > 0 ? std::max(seconds_left(), 0.001) : 0,
                                             stopped, timeout));
    arrow::fs::FileInfo info(file.path, arrow::fs::FileType::File);
    info.set_size(file.size);
    ARROW_ASSIGN_OR_RAISE(auto input, fs->OpenInputFile(info));
    StreamingHash checksum;
    const auto& io = arrow::io::default_io_context();
    auto read = [&](int64_t offset) {
      return input->ReadAsync(io, offset, std::min(kChunkBytes, file.size - offset));
    };
    // Two reads in flight: the next chunk travels while this one is written.
    arrow::Future<std::shared_ptr<arrow::Buffer>> next;
    if (file.size > 0) next = read(0);
    // A read left in flight on an error is waited for (it writes nothing of
    // ours); one that outlived the deadline or a stop is left to finish alone.
    struct Drain {
      arrow::Future<std::shared_ptr<arrow::Buffer>>* f;
      bool abandon = false;
      ~Drain() {
        if (f->is_valid() && !abandon) f->Wait();
      }
    } drain{&next};
    int64_t offset = 0;
    while (offset < file.size) {
      if (stopped() || !wait(next)) {
        // The abandoned read keeps the filesystem and file alive until it ends
        // (their destructors would wait for it).
        next.AddCallback([keep_fs = fs, keep_input = input](const auto&) {});
        drain.abandon = true;
        return arrow::Status::Cancelled(timed_out ? "remote_timeout" : "stopped");
      }
      ARROW_ASSIGN_OR_RAISE(auto buffer, next.result());
      next = {};
      last_progress = NowNs();
      remote_bytes->fetch_add(buffer->size(), std::memory_order_relaxed);
      if (buffer->size() == 0) {
        return arrow::Status::Invalid("the remote file has ", offset, " bytes, expected ",
                                      file.size, " (it changed since it was listed)");
      }
      const int64_t after = offset + buffer->size();
      if (after < file.size) next = read(after);
      local = WriteAllAt(temp.data.fd(), buffer->data(), buffer->size(), offset, temp.data.path());
      if (!local.ok()) return arrow::Status::Invalid("local write failed");  // not retried
      checksum.Update(buffer->data(), static_cast<size_t>(buffer->size()));
      offset = after;
    }
    // Rewritten while it travelled: the copy may mix both versions.
    ARROW_RETURN_NOT_OK(CheckRemoteUnchanged(*fs, file.path, file.size, file.version,
                                             timeout > 0 ? std::max(seconds_left(), 0.001) : 0,
                                             stopped, timeout));
    return checksum.Digest();
  };
  // With a remote_timeout, retried until it passes without progress (each
  // attempt checks), however many attempts that takes; without one, 1 +
  // max_retries attempts.
  storage_internal::RetryPolicy policy = retry;
  if (timeout > 0) {
    policy.max_retries = std::numeric_limits<int>::max();
    policy.max_seconds = std::min(policy.max_seconds, timeout / 4);  // no long sleep past it
  }
  arrow::Status last_failure;  // the store's, said when the deadline ends the retries
  auto tracked = [&]() -> arrow::Result<uint64_t> {
    auto r = attempt();
    if (!r.ok() && !r.status().IsCancelled()) last_failure = r.status();
    if (!r.ok() && storage_internal::IsRetryable(r.status()) && timeout > 0 &&
        seconds_left() <= 0) {
      // A stall that used the time up: no wait before an attempt that would
      // give up at once (`cache warm` took 79 s for a 60 s remote_timeout).
      timed_out = true;
      return arrow::Status::Cancelled("remote_timeout");
    }
    return r;
  };
  const int64_t start = NowNs();
  auto result = storage_internal::Retry(policy, interrupt, tracked);
  fetch_ns.fetch_add(NowNs() - start, std::memory_order_relaxed);
  if (!local.ok()) {
    *local_failure = true;
    return local;
  }
  *timed_out_out = timed_out;
  if (timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", timeout);
    return Error(ErrorKind::kStorage,
                 "cannot fetch remote file '" + file.path + "': no data from the storage within " +
                     seconds + " s (remote_timeout)" +
                     (last_failure.ok() ? std::string()
                                        : "; the last attempt failed: " + last_failure.message()));
  }
  if (!result.ok() && !result.status().IsCancelled()) {
    // A file that changed since the catalog read it is bad data, not a fault.
    const bool changed = KindOf(result.status()) == ErrorKind::kInvalidData;
    return Error(changed ? ErrorKind::kInvalidData : ErrorKind::kStorage,
                 "cannot fetch remote file '" + file.path + "': " + result.status().message());
  }
  return result;
}

// No fsync: an entry torn by a power loss fails the checksum that every
// process verifies before it first serves the entry, and is fetched again.
// The fsyncs cost about 7 ms per 12 MB file, time in which the prefetcher's
// link sat idle between files (bench_remote.py, first epoch).
arrow::Status FileCache::Impl::Commit(const std::string& name, const EntryMeta& meta, Temp& temp) {
  const std::string text = cache_internal::FormatMeta(meta);
  ARROW_RETURN_NOT_OK(WriteAllAt(temp.meta.fd(), reinterpret_cast<const uint8_t*>(text.data()),
                                 static_cast<int64_t>(text.size()), 0, temp.meta.path()));
  // Old metadata goes first: a crash between the renames leaves data without
  // metadata (never served), not new data under old metadata.
  const std::string data = PathOf(name, ".data");
  const std::string meta_path = PathOf(name, ".meta");
  if (::unlink(meta_path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "cannot replace '" + meta_path + "'");
  }
  ARROW_RETURN_NOT_OK(temp.data.Commit(data));
  return temp.meta.Commit(meta_path);
}

}  // namespace shardfeed
