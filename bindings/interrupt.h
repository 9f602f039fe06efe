// Blocking calls that still answer Ctrl-C.  Python runs signal handlers only on
// the main thread and only when it holds the GIL, so a call that waits in C++
// with the GIL released would sit out a SIGINT until the wait ends (minutes
// against a stalled server).  These helpers wait in short slices and run the
// handlers between them; a KeyboardInterrupt then propagates as usual.
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "gil.h"

namespace shardfeed::py {

// How often a blocked call looks for signals.
inline constexpr std::chrono::milliseconds kSignalPoll{50};

// Runs Python's signal handlers (needs the GIL); throws the exception one
// raised (KeyboardInterrupt for SIGINT).
void CheckSignals();

// Runs `fn` on a helper thread and waits for it with the GIL released, looking
// for signals every kSignalPoll.  On a signal the exception propagates at once
// and the helper finishes on its own (its result is dropped): for calls that
// cannot be cancelled, such as opening a catalog.
template <typename T>
T RunInterruptible(std::function<T()> fn) {
  struct Shared {
    std::mutex mu;
    std::condition_variable done;
    std::optional<T> result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, fn = std::move(fn)] {
    T value = fn();
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->result.emplace(std::move(value));
    shared->done.notify_all();
  }).detach();
  for (;;) {
    {
      ReleaseGil release;
      std::unique_lock<std::mutex> lock(shared->mu);
      if (shared->done.wait_for(lock, kSignalPoll, [&] { return shared->result.has_value(); })) {
        return std::move(*shared->result);
      }
    }
    CheckSignals();
  }
}

}  // namespace shardfeed::py
