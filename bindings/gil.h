// Releasing the GIL around blocking calls, safely at interpreter exit.
//
// CPython before 3.14 ends a thread that takes the GIL back after finalization
// has begun with pthread_exit: a forced unwind, which through the noexcept
// destructor of a GIL guard is std::terminate ("terminate called without an
// active exception").  A daemon thread that iterated a Loader while the main
// thread exited did exactly that: its next() woke (from its signal poll, or
// from the engine closed at exit) and took the GIL back.
//
// So after shardfeed's exit hook has run (BeginExit, from atexit, before
// finalization), any thread but the exiting one never takes the GIL back
// through these helpers: it sleeps until the process ends instead (a daemon
// thread would be frozen at its next Python line anyway), and what it held is
// leaked rather than released.  Non-daemon threads are joined before the exit
// hooks run, so only daemon threads can be parked; an exit hook registered
// before shardfeed was imported that joins such a thread without a timeout
// would wait for good (hooks run last-registered first).
#pragma once

#include <Python.h>

#include <functional>
#include <type_traits>
#include <utility>

namespace shardfeed::py {

// Like nanobind::gil_scoped_release, but the destructor parks this thread for
// good instead of taking the GIL back once the interpreter is exiting.
class ReleaseGil {
 public:
  ReleaseGil() noexcept;
  ~ReleaseGil();
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

  // What to do before this thread parks instead of taking the GIL back (e.g.
  // stop the engine it just made, which the exit hook could not see: its
  // workers would run on through the process's static destructors).
  void OnPark(std::function<void()> fn) { on_park_ = std::move(fn); }

 private:
  PyThreadState* state_;
  std::function<void()> on_park_;
};

// Called once, with the GIL held, by the thread that runs the exit hooks (and
// then finalizes): from now on other threads no longer take the GIL back.
void BeginExit();

// Runs fn with the GIL taken (from any thread, Python's or not), unless the
// interpreter is gone or exiting and this is not the exiting thread: then it
// does not run fn and returns false.
bool WithGilUnlessExiting(void (*fn)(void*), void* arg);

template <typename F>
bool WithGilUnlessExiting(F&& fn) {
  return WithGilUnlessExiting([](void* f) { (*static_cast<std::remove_reference_t<F>*>(f))(); },
                              &fn);
}

}  // namespace shardfeed::py
