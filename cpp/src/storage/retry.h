// Retries of remote reads: bounded exponential backoff with jitter, a stop
// request that interrupts the wait, and a remote file whose reads retry.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <arrow/filesystem/filesystem.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "util/deadline_file.h"

namespace shardfeed::storage_internal {

// A stop request that sleeping threads wait on (a condition variable, so a
// stop wakes them at once).
class Interrupt {
 public:
  void Request();
  bool requested() const { return requested_.load(std::memory_order_acquire); }
  // Sleeps `seconds` unless a stop is requested first; false when stopped.
  bool SleepFor(double seconds) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> requested_{false};
};

struct RetryPolicy {
  int max_retries = 5;  // without a deadline (remote_timeout=0)
  double base_seconds = 0.05;
  double max_seconds = 5.0;
  // No retry whose wait would end at or after it: a read abandoned at its
  // deadline (WithDeadline) then ends on its own instead of retrying for
  // seconds more, holding Arrow's S3 client lock that new clients wait for.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The wait before retry `attempt` (0-based): base * 2^attempt, capped at
  // max_seconds, times a random factor in [0.5, 1] so that many readers
  // throttled together (S3 503 SlowDown) do not retry in lockstep.  The jitter
  // only spaces requests; it never touches the data or its order.
  double Delay(int attempt) const;
};

// Whether retrying can help: not for a missing key or bucket, a denied
// access, invalid arguments, or a cancellation.
bool IsRetryable(const arrow::Status& status);

inline const arrow::Status& StatusOf(const arrow::Status& status) { return status; }
template <typename T>
const arrow::Status& StatusOf(const arrow::Result<T>& result) {
  return result.status();
}

// Runs `op` until it succeeds, fails in a way retrying cannot fix, the next
// wait would reach the policy's deadline (with one: remote_timeout is the
// bound, as the README promises, however many attempts fit), has failed
// 1 + max_retries times (without one), or its caller gave up
// (CallAbandoned); waits Delay(attempt) in between.  Returns
// Cancelled when `interrupt` is requested during a wait.
template <typename Op>
auto Retry(const RetryPolicy& policy, const Interrupt* interrupt, Op&& op) -> decltype(op()) {
  static const Interrupt kNever;
  const Interrupt& stop = interrupt ? *interrupt : kNever;
  for (int attempt = 0;; ++attempt) {
    auto result = op();
    const bool bounded = policy.deadline != std::chrono::steady_clock::time_point::max();
    if (result.ok() || (!bounded && attempt >= policy.max_retries) ||
        !IsRetryable(StatusOf(result)) || CallAbandoned()) {
      return result;
    }
    const double delay = policy.Delay(attempt);
    if (bounded &&
        std::chrono::duration<double>(policy.deadline - std::chrono::steady_clock::now()).count() <=
            delay) {
      return result;
    }
    if (!stop.SleepFor(delay)) return arrow::Status::Cancelled("stopped");
  }
}

// "s3://bucket/key": how messages name a remote file (no endpoint or
// credentials, not the cache's internal key).
std::string RemoteName(const arrow::fs::FileSystem& fs, const std::string& path);

// A remote file read straight from its filesystem (an uncached read): every
// read is retried under `policy` and its bytes are added to `remote_bytes`;
// errors name `key` (RemoteName).
class RemoteFile : public arrow::io::RandomAccessFile {
 public:
  static arrow::Result<std::shared_ptr<RemoteFile>> Open(
      const std::shared_ptr<arrow::fs::FileSystem>& fs, const std::string& path, int64_t size,
      const std::string& key, RetryPolicy policy,
      std::shared_ptr<std::atomic<int64_t>> remote_bytes);

  arrow::Status Close() override;
  bool closed() const override;
  arrow::Result<int64_t> Tell() const override;
  arrow::Status Seek(int64_t position) override;
  arrow::Result<int64_t> GetSize() override;
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override;
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, bool allow_short_read,
                                void* out) override;
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes,
                                                       bool allow_short_read) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override;

  RemoteFile(std::shared_ptr<arrow::io::RandomAccessFile> inner, std::string key,
             RetryPolicy policy, std::shared_ptr<std::atomic<int64_t>> remote_bytes, int64_t size);

 private:
  arrow::Status Named(const arrow::Status& status) const;
  // An IOError (retried) when a read at `position` gave fewer than the
  // min(nbytes, size - position) bytes the object holds there.
  arrow::Status CheckLength(int64_t position, int64_t nbytes, int64_t got) const;
  // inner_->ReadAt(position, nbytes, out), with proof that the range's last byte came
  // from the storage (a body cut short under a Content-Length that says so leaves
  // Arrow's buffer unwritten at its end while Arrow counts every byte read).
  arrow::Result<int64_t> ReadMarked(int64_t position, int64_t nbytes, void* out);
  template <typename R>
  R Count(R result);
  // read() under the retry policy, a short answer (CheckLength) retried too; counted.
  template <typename Op>
  auto Checked(int64_t position, int64_t nbytes, Op&& read) -> decltype(read());

  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  std::string key_;
  RetryPolicy policy_;
  std::shared_ptr<std::atomic<int64_t>> remote_bytes_;
  int64_t size_;  // the object's size as the catalog saw it
};

}  // namespace shardfeed::storage_internal
