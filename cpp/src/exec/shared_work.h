// Parts of one decode that other workers may take while they wait for it
// (internal).
//
// A row group is decoded by one worker.  When row groups are large against
// the memory limit (Spark's 128 MB row groups, a window of one row group),
// nothing can be decoded ahead, and the workers that need the row group being
// decoded waited for it while one core did the work: bench_memory's 262k-row
// groups ran at 1.1M rows/s at the default limit against 1.7M at 1 GiB.  The
// decoding worker now offers the parts that can run anywhere (a stack's tile
// reads, 16 columns each) and the workers waiting for that row group take
// them.  The parts write disjoint parts of one matrix; the owner returns only
// once every part taken has finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

#include <arrow/status.h>

namespace shardfeed {

class SharedWork {
 public:
  // Parts 0 .. parts - 1, each run by run(part) in whichever thread takes it.
  SharedWork(size_t parts, std::function<arrow::Status(size_t)> run);
  SharedWork(const SharedWork&) = delete;
  SharedWork& operator=(const SharedWork&) = delete;

  // Runs one part nobody has taken yet; false when none is left.  An
  // exception from the part becomes its error.
  bool RunOne();
  // Whether a part is left to take.
  bool has_work() const { return next_.load() < parts_; }
  // The owner: runs parts until none is left, then waits for those that
  // others took.  The first error of any part.
  arrow::Status Finish();

 private:
  const size_t parts_;
  const std::function<arrow::Status(size_t)> run_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  std::condition_variable finished_;
  size_t done_ = 0;
  arrow::Status error_;
};

}  // namespace shardfeed
