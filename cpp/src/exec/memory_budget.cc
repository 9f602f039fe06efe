#include "exec/memory_budget.h"

#include <algorithm>
#include <limits>

namespace shardfeed {

bool MemoryBudget::TryReserve(Kind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || !Fits(bytes)) return false;
  BookLocked(kind, bytes);
  return true;
}

void MemoryBudget::Add(Kind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  BookLocked(kind, bytes);
}

void MemoryBudget::Release(Kind kind, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    of_[kind] -= bytes;
    if (kind != kIdle) used_ -= bytes;
  }
  // Idle bytes are not `used`: no waiter's bytes fit now that did not before.
  if (kind != kIdle) changed_.notify_all();
}

void MemoryBudget::Convert(Kind from, int64_t from_bytes, Kind to, int64_t to_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    of_[from] -= from_bytes;
    of_[to] += to_bytes;
    if (from != kIdle) used_ -= from_bytes;
    if (to != kIdle) used_ += to_bytes;
    UpdatePeaksLocked();
  }
  changed_.notify_all();
}

void MemoryBudget::Wake() {
  // Taking the lock orders the caller's change before the waiters' next look.
  { std::lock_guard<std::mutex> lock(mu_); }
  changed_.notify_all();
}

void MemoryBudget::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  changed_.notify_all();
}

int64_t MemoryBudget::Excess() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_ == 0 ? 0 : std::max<int64_t>(0, used_ + of_[kIdle] - limit_);
}

int64_t MemoryBudget::Room(bool with_batches) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ == 0) return std::numeric_limits<int64_t>::max();
  const int64_t booked = with_batches ? used_ : used_ - of_[kBatches];
  return std::max<int64_t>(0, limit_ - booked - of_[kIdle]);
}

MemoryBudget::Snapshot MemoryBudget::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.limit = limit_;
  s.used = used_;
  s.peak = peak_;
  s.peak_of = peak_of_;
  s.of = of_;
  s.waits = waits_;
  s.wait_seconds = static_cast<double>(wait_ns_) * 1e-9;
  s.urgent_over_limit = urgent_over_limit_;
  return s;
}

void MemoryBudget::BookLocked(Kind kind, int64_t bytes) {
  of_[kind] += bytes;
  if (kind != kIdle) used_ += bytes;
  UpdatePeaksLocked();
}

void MemoryBudget::UpdatePeaksLocked() {
  peak_ = std::max(peak_, used_);
  for (int k = 0; k < kKinds; ++k) peak_of_[k] = std::max(peak_of_[k], of_[k]);
}

}  // namespace shardfeed
