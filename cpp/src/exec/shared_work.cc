#include "exec/shared_work.h"

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "shardfeed/status.h"

namespace shardfeed {

SharedWork::SharedWork(size_t parts, std::function<arrow::Status(size_t)> run)
    : parts_(parts), run_(std::move(run)) {}

bool SharedWork::RunOne() {
  const size_t part = next_.fetch_add(1);
  if (part >= parts_) return false;
  arrow::Status status;
  try {
    status = run_(part);
  } catch (const std::bad_alloc&) {
    status = arrow::Status::OutOfMemory("out of memory");
  } catch (const std::exception& e) {
    status = Error(ErrorKind::kInvalidData, e.what());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok() && error_.ok()) error_ = std::move(status);
  if (++done_ == parts_) finished_.notify_all();
  return true;
}

arrow::Status SharedWork::Finish() {
  while (RunOne()) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  finished_.wait(lock, [&] { return done_ == parts_; });
  return error_;
}

}  // namespace shardfeed
