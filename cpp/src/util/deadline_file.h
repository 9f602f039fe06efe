// A remote file whose reads give up at a deadline (internal).
//
// A server that accepts connections and never answers stalls a read until the
// HTTP client's low-speed timeout, then the client and the caller retry: the
// first error came after minutes.  Every read through this wrapper waits at
// most until one deadline (set when the file is opened for a row group, so it
// counts retries and every range of that row group), then fails with a
// StorageError.  The abandoned request ends on its own thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace shardfeed {

// The StorageError of a call that got no answer within `timeout_seconds`.
arrow::Status NoAnswerWithin(double timeout_seconds);

// now + `seconds`; no deadline (the clock's maximum) for 0, negative, NaN or
// more than a year, which the clock's duration could not hold exactly.
std::chrono::steady_clock::time_point DeadlineAfter(double seconds);

// True on the thread of a CallBefore call whose caller has stopped waiting
// (deadline or stop): retry loops below it (the S3 client's, ours) end
// instead of retrying for no one.  False on any other thread.
bool CallAbandoned();

// The flag CallAbandoned reads on this thread (null: none); CallBefore's.
void SetAbandonedFlag(const std::atomic<bool>* flag);

// CallBefore's threads still running, whether or not their callers still
// wait: counted, so that the exit hook can wait for them (bounded) before
// pyarrow's tears the AWS SDK down under them (a filesystem still being made
// there crashed the process at exit).
void DetachedCallStarted();
void DetachedCallEnded();
// Waits until no CallBefore thread runs, or `seconds` pass; whether none runs.
bool WaitForDetachedCalls(double seconds);

// Runs `call` on a thread of its own and waits for its result until
// `deadline`, looking at `stopped` (when given) every 100 ms: past the
// deadline NoAnswerWithin(timeout_seconds), once stopped Cancelled.  Then the
// thread finishes, or fails, alone, so `call` must own what it uses.  Not on
// Arrow's I/O pool: a filesystem's "async" call may run on the caller's thread
// (Arrow's default for GCS, HDFS, ...), and waiting on the pool from the pool
// could starve it.  Once the caller gives up, CallAbandoned() is true on
// that thread.
template <typename T>
arrow::Result<T> CallBefore(std::function<arrow::Result<T>()> call,
                            std::chrono::steady_clock::time_point deadline, double timeout_seconds,
                            const std::function<bool()>& stopped) {
  struct Shared {
    std::mutex mu;
    std::condition_variable done;
    std::optional<arrow::Result<T>> result;
    std::atomic<bool> abandoned{false};
  };
  auto shared = std::make_shared<Shared>();
  DetachedCallStarted();
  std::thread([shared, call = std::move(call)]() mutable {
    SetAbandonedFlag(&shared->abandoned);
    auto result = call();
    call = nullptr;  // what it holds (a filesystem) goes before the count does
    SetAbandonedFlag(nullptr);
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->result.emplace(std::move(result));
      shared->done.notify_all();
    }
    shared.reset();  // the last holder when the caller gave up: the result goes too
    DetachedCallEnded();
  }).detach();
  std::unique_lock<std::mutex> lock(shared->mu);
  auto ready = [&] { return shared->result.has_value(); };
  using Clock = std::chrono::steady_clock;
  while (!ready() && Clock::now() < deadline) {
    if (stopped && stopped()) {
      shared->abandoned.store(true, std::memory_order_relaxed);
      return arrow::Status::Cancelled("the loader was closed");
    }
    shared->done.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)),
                            ready);
  }
  if (!ready()) {
    shared->abandoned.store(true, std::memory_order_relaxed);
    return NoAnswerWithin(timeout_seconds);
  }
  return std::move(*shared->result);
}

// `inner` with reads bounded by now + `timeout_seconds` (<= 0: no deadline,
// `inner` itself is returned).  A read also gives up (Cancelled) soon after
// `*stop` becomes true, so that stopping an engine never waits for a hung server.
// `setting_seconds` (> 0): the remote_timeout errors name, where the deadline
// is what was left of it.
std::shared_ptr<arrow::io::RandomAccessFile> WithDeadline(
    std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
    const std::atomic<bool>* stop = nullptr, double setting_seconds = 0);

}  // namespace shardfeed
