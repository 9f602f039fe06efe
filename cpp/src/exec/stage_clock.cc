#include "exec/stage_clock.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <arrow/buffer.h>

#include "util/memory.h"

namespace shardfeed {

namespace {

thread_local int g_worker = -1;

using Clock = std::chrono::steady_clock;

class TimedFileImpl final : public arrow::io::RandomAccessFile {
 public:
  TimedFileImpl(std::shared_ptr<arrow::io::RandomAccessFile> file,
                std::shared_ptr<StageClock> clock, Stage stage, int64_t arg, int delay_us,
                std::shared_ptr<std::atomic<int64_t>> call_ns, const std::atomic<bool>* stop)
      : file_(std::move(file)),
        clock_(std::move(clock)),
        stage_(stage),
        arg_(arg),
        delay_us_(delay_us),
        call_ns_(std::move(call_ns)),
        stop_(stop),
        zero_copy_(file_->supports_zero_copy()) {}

  arrow::Status Close() override { return file_->Close(); }
  bool closed() const override { return file_->closed(); }
  arrow::Result<int64_t> Tell() const override { return file_->Tell(); }
  arrow::Status Seek(int64_t position) override { return file_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return file_->GetSize(); }

  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    const auto t0 = Start();
    auto r = file_->Read(nbytes, out);
    Done(t0, r.ok() ? *r : 0);
    return r;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    const auto t0 = Start();
    auto r = zero_copy_ ? file_->Read(nbytes)
                        : ReadInto(nbytes, [&](void* out) { return file_->Read(nbytes, out); });
    Done(t0, r.ok() ? (*r)->size() : 0);
    return r;
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    const auto t0 = Start();
    auto r = file_->ReadAt(position, nbytes, out);
    Done(t0, r.ok() ? *r : 0);
    return r;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    const auto t0 = Start();
    auto r = zero_copy_ ? file_->ReadAt(position, nbytes) : ReadInto(nbytes, [&](void* out) {
      return file_->ReadAt(position, nbytes, out);
    });
    Done(t0, r.ok() ? (*r)->size() : 0);
    return r;
  }
  bool supports_zero_copy() const override { return zero_copy_; }

 private:
  // The bytes in a buffer of the engine's pool, not the filesystem's (Arrow's
  // default pool): so the memory budget's pool holds every read buffer, and
  // what a read frees is reused by the next decode.
  template <typename ReadFn>
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadInto(int64_t nbytes, ReadFn&& read) {
    if (nbytes < 0) return arrow::Status::Invalid("a read of ", nbytes, " bytes");
    ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ResizableBuffer> buffer,
                          arrow::AllocateResizableBuffer(nbytes, EnginePool()));
    ARROW_ASSIGN_OR_RAISE(const int64_t got, read(buffer->mutable_data()));
    if (got < nbytes) ARROW_RETURN_NOT_OK(buffer->Resize(got, /*shrink_to_fit=*/false));
    return std::shared_ptr<arrow::Buffer>(std::move(buffer));
  }

  Clock::time_point Start() const {
    const auto t0 = Clock::now();
    // Test hook: a throttled source (in slices: a stopped engine does not wait it out).
    const auto until = t0 + std::chrono::microseconds(delay_us_);
    while (delay_us_ > 0 && Clock::now() < until && !(stop_ && stop_->load())) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(10)));
    }
    return t0;
  }
  void Done(Clock::time_point t0, int64_t bytes) {
    if (call_ns_) *call_ns_ += (Clock::now() - t0).count();
    clock_->Add(stage_, t0, bytes, 0, arg_);
  }

  std::shared_ptr<arrow::io::RandomAccessFile> file_;
  std::shared_ptr<StageClock> clock_;
  const Stage stage_;
  const int64_t arg_;
  const int delay_us_;
  std::shared_ptr<std::atomic<int64_t>> call_ns_;
  const std::atomic<bool>* stop_;
  const bool zero_copy_;  // a mapped file hands out its own memory: keep that
};

}  // namespace

const char* StageName(Stage s) {
  switch (s) {
    case Stage::kFetch:
      return "fetch";
    case Stage::kRead:
      return "read";
    case Stage::kDecode:
      return "decode";
    case Stage::kTransform:
      return "transform";
    case Stage::kAssemble:
      return "assemble";
    case Stage::kWaitFull:
      return "queue_full";
    case Stage::kWaitEmpty:
      return "consumer_wait";
    case Stage::kCount:
      break;
  }
  return "?";
}

StageClock::StageClock(bool trace) : trace_(trace), origin_(Clock::now()) {}

void StageClock::SetWorker(int worker) { g_worker = worker; }

void StageClock::Add(Stage s, Clock::time_point start, int64_t bytes, int64_t rows, int64_t arg) {
  const auto now = Clock::now();
  AddSpan(s, start, now, (now - start).count(), bytes, rows, arg);
}

void StageClock::AddSpan(Stage s, Clock::time_point start, Clock::time_point end, int64_t busy_ns,
                         int64_t bytes, int64_t rows, int64_t arg) {
  ns_[Index(s)] += busy_ns;
  bytes_[Index(s)] += bytes;
  rows_[Index(s)] += rows;
  if (trace_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() < kMaxEvents) {
      events_.push_back({g_worker, s, (start - origin_).count(), (end - start).count(), arg});
    }
  }
}

std::vector<TraceEvent> StageClock::trace() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::shared_ptr<arrow::io::RandomAccessFile> TimedFile(
    std::shared_ptr<arrow::io::RandomAccessFile> file, std::shared_ptr<StageClock> clock,
    Stage stage, int64_t arg, int delay_us, std::shared_ptr<std::atomic<int64_t>> call_ns,
    const std::atomic<bool>* stop) {
  return std::make_shared<TimedFileImpl>(std::move(file), std::move(clock), stage, arg, delay_us,
                                         std::move(call_ns), stop);
}

}  // namespace shardfeed
