#include "util/live_threads.h"

#include <atomic>

namespace shardfeed {

namespace {
std::atomic<int64_t> live{0};
}  // namespace

LiveThreadGuard::LiveThreadGuard() { live.fetch_add(1, std::memory_order_relaxed); }
LiveThreadGuard::~LiveThreadGuard() {
  if (owns_) live.fetch_sub(1, std::memory_order_relaxed);
}
int64_t LiveThreadGuard::count() { return live.load(std::memory_order_relaxed); }

}  // namespace shardfeed
