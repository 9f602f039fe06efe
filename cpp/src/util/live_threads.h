// Counts the threads that the engine starts (workers, prefetchers) and that
// have not returned yet.  Tests use it to prove that closing or abandoning a
// loader joins every one of them: counting the process's OS threads cannot,
// since Arrow's I/O pool grows lazily.
#pragma once

#include <cstdint>

namespace shardfeed {

// Move it into the thread's callable: the thread counts from before it is
// started (a count taken as soon as the std::thread exists includes it) until
// its callable is destroyed, after its body returned.
class LiveThreadGuard {
 public:
  static LiveThreadGuard Start() { return LiveThreadGuard(); }
  LiveThreadGuard(LiveThreadGuard&& other) noexcept : owns_(other.owns_) { other.owns_ = false; }
  LiveThreadGuard(const LiveThreadGuard&) = delete;
  LiveThreadGuard& operator=(const LiveThreadGuard&) = delete;
  LiveThreadGuard& operator=(LiveThreadGuard&&) = delete;
  ~LiveThreadGuard();

  static int64_t count();

 private:
  LiveThreadGuard();
  bool owns_ = true;
};

}  // namespace shardfeed
