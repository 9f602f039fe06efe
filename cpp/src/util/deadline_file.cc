#include "util/deadline_file.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <arrow/buffer.h>
#include <arrow/io/interfaces.h>

#include "shardfeed/status.h"

namespace shardfeed {

namespace {

using Clock = std::chrono::steady_clock;

thread_local const std::atomic<bool>* abandoned_flag = nullptr;

class DeadlineFile final : public arrow::io::RandomAccessFile {
 public:
  DeadlineFile(std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
               const std::atomic<bool>* stop, double setting_seconds)
      : inner_(std::move(inner)),
        stop_(stop),
        timeout_seconds_(setting_seconds > 0 ? setting_seconds : timeout_seconds),
        deadline_(DeadlineAfter(timeout_seconds)) {}

  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Seek(int64_t position) override { return inner_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    ARROW_ASSIGN_OR_RAISE(int64_t position, inner_->Tell());
    ARROW_ASSIGN_OR_RAISE(int64_t n, ReadAt(position, nbytes, out));
    ARROW_RETURN_NOT_OK(inner_->Seek(position + n));
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    ARROW_ASSIGN_OR_RAISE(int64_t position, inner_->Tell());
    ARROW_ASSIGN_OR_RAISE(auto buffer, ReadAt(position, nbytes));
    ARROW_RETURN_NOT_OK(inner_->Seek(position + buffer->size()));
    return buffer;
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    ARROW_ASSIGN_OR_RAISE(auto buffer, ReadAt(position, nbytes));
    std::memcpy(out, buffer->data(), static_cast<size_t>(buffer->size()));
    return buffer->size();
  }
  // The one timed path (see CallBefore).
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    const std::atomic<bool>* stop = stop_;
    return CallBefore<std::shared_ptr<arrow::Buffer>>(
        [inner = inner_, position, nbytes] { return inner->ReadAt(position, nbytes); }, deadline_,
        timeout_seconds_, [stop] { return stop != nullptr && stop->load(); });
  }

 private:
  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  const std::atomic<bool>* stop_;
  double timeout_seconds_;  // the setting, as errors name it
  Clock::time_point deadline_;
};

}  // namespace

bool CallAbandoned() {
  return abandoned_flag != nullptr && abandoned_flag->load(std::memory_order_relaxed);
}

void SetAbandonedFlag(const std::atomic<bool>* flag) { abandoned_flag = flag; }

namespace {
// Never destroyed: threads may end after exit.
std::mutex* detached_mu = new std::mutex;
std::condition_variable* detached_done = new std::condition_variable;
int64_t detached_calls = 0;  // under detached_mu

std::mutex& DetachedMutex() { return *detached_mu; }
std::condition_variable& DetachedDone() { return *detached_done; }

// A forked child has none of the parent's threads (and the mutex may have
// been held by one of them): it starts with none and a free mutex; the
// parent's copies are left as they are.
void ForgetDetachedInChild() {
  detached_mu = new std::mutex;
  detached_done = new std::condition_variable;
  detached_calls = 0;
}
[[maybe_unused]] const int kAtFork = pthread_atfork(nullptr, nullptr, ForgetDetachedInChild);
}  // namespace

void DetachedCallStarted() {
  std::lock_guard<std::mutex> lock(DetachedMutex());
  ++detached_calls;
}

void DetachedCallEnded() {
  std::lock_guard<std::mutex> lock(DetachedMutex());
  if (--detached_calls == 0) DetachedDone().notify_all();
}

bool WaitForDetachedCalls(double seconds) {
  std::unique_lock<std::mutex> lock(DetachedMutex());
  return DetachedDone().wait_for(lock, std::chrono::duration<double>(std::max(0.0, seconds)),
                                 [] { return detached_calls == 0; });
}

std::chrono::steady_clock::time_point DeadlineAfter(double seconds) {
  constexpr double kYear = 365.0 * 24 * 3600;
  if (!(seconds > 0) || !(seconds <= kYear)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

arrow::Status NoAnswerWithin(double timeout_seconds) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout_seconds);
  return Error(ErrorKind::kStorage,
               std::string("no answer from the storage within ") + seconds + " s (remote_timeout)");
}

std::shared_ptr<arrow::io::RandomAccessFile> WithDeadline(
    std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
    const std::atomic<bool>* stop, double setting_seconds) {
  if (timeout_seconds <= 0) return inner;
  return std::make_shared<DeadlineFile>(std::move(inner), timeout_seconds, stop, setting_seconds);
}

}  // namespace shardfeed
