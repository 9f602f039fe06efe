#include "util/deadline_file.h"

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
constexpr auto kStopPoll = std::chrono::milliseconds(100);

class DeadlineFile final : public arrow::io::RandomAccessFile {
 public:
  DeadlineFile(std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
               const std::atomic<bool>* stop)
      : inner_(std::move(inner)),
        stop_(stop),
        timeout_seconds_(timeout_seconds),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_seconds))) {}

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
  // The one timed path.  The read runs on a thread of its own (not Arrow's I/O
  // pool: ReadAsync's default runs this very function there, and waiting on
  // the pool from the pool could starve it); on timeout the thread is left to
  // finish, or fail, alone.
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    struct Shared {
      std::mutex mu;
      std::condition_variable done;
      std::optional<arrow::Result<std::shared_ptr<arrow::Buffer>>> result;
    };
    auto shared = std::make_shared<Shared>();
    std::thread([shared, inner = inner_, position, nbytes] {
      auto result = inner->ReadAt(position, nbytes);
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->result.emplace(std::move(result));
      shared->done.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(shared->mu);
    auto ready = [&] { return shared->result.has_value(); };
    while (!ready() && Clock::now() < deadline_) {
      if (stop_ && stop_->load()) return arrow::Status::Cancelled("the loader was closed");
      shared->done.wait_until(lock, std::min(deadline_, Clock::now() + kStopPoll), ready);
    }
    if (!ready()) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_seconds_);
      return Error(ErrorKind::kStorage, std::string("no answer from the storage within ") +
                                            seconds + " s (remote_timeout)");
    }
    return std::move(*shared->result);
  }

 private:
  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  const std::atomic<bool>* stop_;
  double timeout_seconds_;
  Clock::time_point deadline_;
};

}  // namespace

std::shared_ptr<arrow::io::RandomAccessFile> WithDeadline(
    std::shared_ptr<arrow::io::RandomAccessFile> inner, double timeout_seconds,
    const std::atomic<bool>* stop) {
  if (timeout_seconds <= 0) return inner;
  return std::make_shared<DeadlineFile>(std::move(inner), timeout_seconds, stop);
}

}  // namespace shardfeed
