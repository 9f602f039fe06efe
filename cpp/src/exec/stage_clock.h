// Where the engine's time goes: per-stage busy time, bytes and rows, and an
// optional timeline of every worker for a Chrome/Perfetto trace (internal).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <arrow/io/interfaces.h>

namespace shardfeed {

// Busy stages of a worker, then the two kinds of waiting (worker on a full
// queue; consumer on an empty one), which the trace shows but busy time omits.
enum class Stage : int {
  kFetch,
  kRead,
  kDecode,
  kTransform,
  kAssemble,
  kWaitFull,
  kWaitEmpty,
  kCount
};
constexpr int kBusyStages = static_cast<int>(Stage::kWaitFull);
const char* StageName(Stage s);

struct TraceEvent {
  int worker = 0;
  Stage stage = Stage::kDecode;
  int64_t start_ns = 0;  // since the engine started
  int64_t duration_ns = 0;
  int64_t arg = 0;  // row group (read/decode/transform) or batch (assemble)
};

class StageClock {
 public:
  explicit StageClock(bool trace);

  // A span from `start` to now.
  void Add(Stage s, std::chrono::steady_clock::time_point start, int64_t bytes, int64_t rows,
           int64_t arg);
  // A span whose busy time is `busy_ns` (less than its length when nested
  // spans of another stage, such as reads inside a decode, are counted apart).
  void AddSpan(Stage s, std::chrono::steady_clock::time_point start,
               std::chrono::steady_clock::time_point end, int64_t busy_ns, int64_t bytes,
               int64_t rows, int64_t arg);
  int64_t ns(Stage s) const { return ns_[Index(s)].load(); }
  int64_t bytes(Stage s) const { return bytes_[Index(s)].load(); }
  int64_t rows(Stage s) const { return rows_[Index(s)].load(); }
  std::vector<TraceEvent> trace() const;

  // Stack member columns decoded (per row group): by the tile read
  // (exec/tile_read.h) or the generic one.
  void CountStackColumns(int64_t tiled, int64_t generic) {
    stack_columns_tiled_ += tiled;
    stack_columns_generic_ += generic;
  }
  int64_t stack_columns_tiled() const { return stack_columns_tiled_.load(); }
  int64_t stack_columns_generic() const { return stack_columns_generic_.load(); }

  // The calling thread's worker number, for the trace.
  static void SetWorker(int worker);

 private:
  static size_t Index(Stage s) { return static_cast<size_t>(s); }
  static constexpr size_t kStages = static_cast<size_t>(Stage::kCount);
  static constexpr size_t kMaxEvents = 1 << 20;  // the trace's memory stays bounded

  std::array<std::atomic<int64_t>, kStages> ns_{};
  std::array<std::atomic<int64_t>, kStages> bytes_{};
  std::array<std::atomic<int64_t>, kStages> rows_{};
  std::atomic<int64_t> stack_columns_tiled_{0}, stack_columns_generic_{0};
  const bool trace_;
  const std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

// A file whose reads are timed into `stage` of `clock` (fetch for remote
// storage, read for local files and cache entries).
// `call_ns`, when given, also sums the read time (for the caller's own split).
// `delay_us` (a test hook: a throttled source) is slept before each read, in
// slices that end early once `*stop` is set (the engine's, which outlives its
// reads), so that stopping an engine does not wait out the throttle.
std::shared_ptr<arrow::io::RandomAccessFile> TimedFile(
    std::shared_ptr<arrow::io::RandomAccessFile> file, std::shared_ptr<StageClock> clock,
    Stage stage, int64_t arg, int delay_us, std::shared_ptr<std::atomic<int64_t>> call_ns = nullptr,
    const std::atomic<bool>* stop = nullptr);

}  // namespace shardfeed
