// EngineOptions::Validate: the range checks of the engine settings a user
// chooses.  The Python layer only checks types and calls this, so each
// mistake has one message.
#include <string>

#include "shardfeed/engine.h"
#include "shardfeed/status.h"
#include "util/number_text.h"

namespace shardfeed {

namespace {
// Each worker is an OS thread with its own queue; far more than the cores of
// any machine only costs memory and stack, and a typo (1e6) must not spawn them.
constexpr int kMaxThreads = 1024;
}  // namespace

arrow::Status EngineOptions::Validate() const {
  if (num_threads < 1 || num_threads > kMaxThreads) {
    return Error(ErrorKind::kInvalidArgument, "num_threads must be in [1, " +
                                                  std::to_string(kMaxThreads) + "], got " +
                                                  std::to_string(num_threads));
  }
  if (queue_depth < 1) {
    return Error(ErrorKind::kInvalidArgument,
                 "prefetch must be at least 1 batch, got " + std::to_string(queue_depth));
  }
  if (prefetch_bytes < 0) {
    return Error(ErrorKind::kInvalidArgument,
                 "prefetch_bytes must be >= 0, got " + std::to_string(prefetch_bytes));
  }
  if (memory_limit < 0) {
    return Error(ErrorKind::kInvalidArgument,
                 "memory_limit must be >= 0 bytes (0: none), got " + std::to_string(memory_limit));
  }
  if (!(remote_timeout >= 0)) {  // NaN too
    return Error(
        ErrorKind::kInvalidArgument,
        "remote_timeout must be >= 0 seconds (0: none), got " + NumberText(remote_timeout));
  }
  if (debug_max_delay_us < 0 || debug_slow_us < 0) {
    return Error(ErrorKind::kInvalidArgument, "debug delays must be >= 0");
  }
  return arrow::Status::OK();
}

}  // namespace shardfeed
