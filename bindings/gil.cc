#include "gil.h"

#include <pthread.h>

#include <chrono>
#include <mutex>
#include <new>
#include <thread>

namespace shardfeed::py {
namespace {

// Taken only without the GIL; a thread holding it may wait for the GIL (the
// GIL's holder never waits for it), so the check and the take are one step.
std::mutex exit_mu;
bool exiting = false;  // guarded by exit_mu
std::thread::id exit_thread;

bool ParkedLocked() { return exiting && std::this_thread::get_id() != exit_thread; }

// A fork copies exit_mu as it is: held, perhaps, by a thread that was waiting
// for the GIL (which the forking thread holds), a thread the child does not
// have, so that the child's first ReleaseGil would wait for good.  The child
// (only the forking thread runs there) starts with it free.
void FreeExitMutexInChild() { new (&exit_mu) std::mutex(); }
[[maybe_unused]] const int kAtFork = pthread_atfork(nullptr, nullptr, FreeExitMutexInChild);

[[noreturn]] void Park() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

}  // namespace

ReleaseGil::ReleaseGil() noexcept : state_(PyEval_SaveThread()) {}

ReleaseGil::~ReleaseGil() {
  std::unique_lock<std::mutex> lock(exit_mu);
  if (ParkedLocked()) {
    lock.unlock();
    if (on_park_) on_park_();
    Park();
  }
  PyEval_RestoreThread(state_);
}

void BeginExit() {
  PyThreadState* state = PyEval_SaveThread();
  {
    std::lock_guard<std::mutex> lock(exit_mu);
    exiting = true;
    exit_thread = std::this_thread::get_id();
  }
  PyEval_RestoreThread(state);
}

bool WithGilUnlessExiting(void (*fn)(void*), void* arg) {
  if (!Py_IsInitialized()) return false;
  if (PyGILState_Check()) {  // holds it already: exit_mu is not for GIL holders
    fn(arg);
    return true;
  }
  std::unique_lock<std::mutex> lock(exit_mu);
  if (ParkedLocked()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  lock.unlock();
  fn(arg);
  PyGILState_Release(gil);
  return true;
}

}  // namespace shardfeed::py
