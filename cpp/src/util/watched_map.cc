#include "util/watched_map.h"

#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace shardfeed {
namespace {

// One watched range.  Written under `seq` (odd while a writer changes it), so
// that the handler, which takes no lock, never pairs one range's start with
// another's end or flag.  A free slot has a zero range and no flag.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uint32_t> seq{0};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<std::atomic<bool>*> flag{nullptr};
};

Slot g_slots[kWatchSlots];
std::atomic<int> g_high{0};  // slots at or past this index were never used
std::atomic<uint32_t> g_hint{0};
std::atomic<int> g_watched{0};
struct sigaction g_previous;
uintptr_t g_page = 4096;
// The process (pid) whose SIGBUS handler is ours, and the one installing it.
std::atomic<pid_t> g_installed{0};
std::atomic<pid_t> g_installing{0};
// A fault outside every watched range, last passed on to g_previous.
std::atomic<uintptr_t> g_passed{0};

void Write(Slot* s, uintptr_t begin, uintptr_t end, std::atomic<bool>* flag) {
  s->seq.fetch_add(1);
  s->begin.store(begin);
  s->end.store(end);
  s->flag.store(flag);
  s->seq.fetch_add(1);
}

// Maps zeros over [address's page, the end of its watched range) and sets the
// range's flag; false when the address is in no watched range.
bool Patch(uintptr_t address) {
  const int high = g_high.load();
  for (int i = 0; i < high; ++i) {
    Slot& s = g_slots[i];
    if (!s.used.load()) continue;
    const uint32_t seq = s.seq.load();
    if (seq & 1) continue;
    const uintptr_t begin = s.begin.load(), end = s.end.load();
    std::atomic<bool>* flag = s.flag.load();
    if (s.seq.load() != seq || flag == nullptr || address < begin || address >= end) continue;
    const uintptr_t first = address & ~(g_page - 1);
    const uintptr_t last = (end + g_page - 1) & ~(g_page - 1);
    // mmap is a system call: safe in a signal handler in practice.
    void* got = ::mmap(reinterpret_cast<void*>(first), last - first, PROT_READ,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (got == MAP_FAILED) return false;
    flag->store(true);
    return true;
  }
  return false;
}

// What SIGBUS did without a handler: end the process (delivered once the
// handler returns).
void EndProcess() {
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof(fallback));
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(SIGBUS, &fallback, nullptr);
  ::raise(SIGBUS);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  // si_code > 0: the kernel's, for a fault at si_addr; else a kill or raise,
  // which no handler can fix: the process ends, as by default.  (A handler
  // before ours that re-raises, as faulthandler does, so ends it too, and
  // cannot loop back to us.)
  if (info == nullptr || info->si_code <= 0) return EndProcess();
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (Patch(address)) return;  // the read runs again, on zeros
  // The same fault again after the handler before ours returned: it fixed
  // nothing, and passing it on again would loop.
  if (g_passed.exchange(address) == address) return EndProcess();
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  EndProcess();
}

// Makes OnSigbus this process's SIGBUS handler, once per process: in a child
// forked after it was installed, a handler the child installed since (PyTorch's
// in a DataLoader worker) is replaced, and becomes the one passed on to.
void Install() {
  const pid_t pid = ::getpid();
  if (g_installed.load() == pid) return;
  pid_t installing = g_installing.load();
  if (installing == pid || !g_installing.compare_exchange_strong(installing, pid)) {
    while (g_installed.load() != pid) std::this_thread::yield();  // another thread's
    return;
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<uintptr_t>(page);
  struct sigaction current;
  const bool ours = ::sigaction(SIGBUS, nullptr, &current) == 0 &&
                    (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == OnSigbus;
  if (!ours) {  // (inherited and still in place: g_previous is inherited too)
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  }
  g_installed.store(pid);
}

// The slot of [begin, end) with `flag`, or -1 when every slot is taken.
int Register(uintptr_t begin, uintptr_t end, std::atomic<bool>* flag) {
  Install();
  const uint32_t start = g_hint.fetch_add(1);
  for (uint32_t k = 0; k < static_cast<uint32_t>(kWatchSlots); ++k) {
    const int i = static_cast<int>((start + k) % kWatchSlots);
    Slot& s = g_slots[i];
    bool expected = false;
    if (s.used.load() || !s.used.compare_exchange_strong(expected, true)) continue;
    Write(&s, begin, end, flag);
    int high = g_high.load();
    while (high < i + 1 && !g_high.compare_exchange_weak(high, i + 1)) {
    }
    g_watched.fetch_add(1);
    return i;
  }
  return -1;
}

void Unregister(int i) {
  Slot& s = g_slots[i];
  Write(&s, 0, 0, nullptr);
  s.used.store(false);
  g_watched.fetch_sub(1);
}

class WatchedBuffer : public arrow::Buffer {
 public:
  WatchedBuffer(std::shared_ptr<arrow::Buffer> mapped, std::shared_ptr<std::atomic<bool>> flag)
      : arrow::Buffer(mapped->data(), mapped->size()),
        mapped_(std::move(mapped)),
        flag_(std::move(flag)) {
    const auto begin = reinterpret_cast<uintptr_t>(data_);
    slot_ = Register(begin, begin + static_cast<uintptr_t>(size_), flag_.get());
  }
  ~WatchedBuffer() override {
    if (slot_ >= 0) Unregister(slot_);  // before mapped_ may unmap the range
  }
  WatchedBuffer(const WatchedBuffer&) = delete;
  WatchedBuffer& operator=(const WatchedBuffer&) = delete;

  const DamageFlag& flag() const { return flag_view_; }

 private:
  std::shared_ptr<arrow::Buffer> mapped_;
  std::shared_ptr<std::atomic<bool>> flag_;
  DamageFlag flag_view_ = flag_;
  int slot_ = -1;
};

}  // namespace

std::shared_ptr<arrow::Buffer> WatchMapped(std::shared_ptr<arrow::Buffer> mapped,
                                           DamageFlag* flag) {
  if (!mapped || mapped->size() == 0) {
    if (flag) flag->reset();
    return mapped;
  }
  auto damage = std::make_shared<std::atomic<bool>>(false);
  if (flag) *flag = damage;
  return std::make_shared<WatchedBuffer>(std::move(mapped), std::move(damage));
}

DamageFlag DamageFlagOf(const std::shared_ptr<arrow::Buffer>& buffer, int64_t* watched_bytes) {
  for (const arrow::Buffer* b = buffer.get(); b != nullptr; b = b->parent().get()) {
    if (const auto* watched = dynamic_cast<const WatchedBuffer*>(b)) {
      if (watched_bytes) *watched_bytes = watched->size();
      return watched->flag();
    }
  }
  return nullptr;
}

int WatchedCountForTesting() { return g_watched.load(); }

}  // namespace shardfeed
