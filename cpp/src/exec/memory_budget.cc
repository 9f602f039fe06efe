#include "exec/memory_budget.h"

#include <algorithm>
#include <limits>

namespace shardfeed {

void BudgetGroup::Join(const std::shared_ptr<MemoryBudget>& budget) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(members_, [](const auto& m) { return m.expired(); });
  members_.push_back(budget);
}

void BudgetGroup::WakeOthers(const MemoryBudget* self) {
  std::vector<std::shared_ptr<MemoryBudget>> others;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& m : members_) {
      auto member = m.lock();
      if (member && member.get() != self) others.push_back(std::move(member));
    }
  }
  // Outside the group's lock: Wake takes the member's.
  for (const auto& member : others) member->Wake();
}

bool MemoryBudget::TryReserve(Kind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return !stopped_ && TryBookLocked(kind, bytes);
}

void MemoryBudget::Add(Kind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  BookLocked(kind, bytes);
}

void MemoryBudget::Release(Kind kind, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CountLocked(kind, -bytes);
  }
  // Idle bytes are not `used`: no waiter's bytes fit now that did not before.
  if (kind != kIdle) {
    changed_.notify_all();
    WakeGroup();
  }
}

void MemoryBudget::Convert(Kind from, int64_t from_bytes, Kind to, int64_t to_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CountLocked(from, -from_bytes);
    CountLocked(to, to_bytes);
    UpdatePeaksLocked();
  }
  changed_.notify_all();
  WakeGroup();
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
  return limit_ == 0 ? 0 : std::max<int64_t>(0, UsedLocked() + IdleLocked() - limit_);
}

int64_t MemoryBudget::Room(bool with_batches) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ == 0) return std::numeric_limits<int64_t>::max();
  // (Another member's built batches count: this one cannot tell when they go.)
  const int64_t booked = with_batches ? UsedLocked() : UsedLocked() - of_[kBatches];
  return std::max<int64_t>(0, limit_ - booked - IdleLocked());
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

bool MemoryBudget::TryBookLocked(Kind kind, int64_t bytes) {
  if (limit_ == 0 || kind == kIdle) {
    BookLocked(kind, bytes);
    return true;
  }
  if (!group_) {
    if (bytes > limit_ - used_) return false;
    BookLocked(kind, bytes);
    return true;
  }
  // The group's count first, by compare-and-swap: another member books under
  // its own lock at the same time.
  int64_t seen = group_->used.load();
  do {
    if (bytes > limit_ - seen) return false;
  } while (!group_->used.compare_exchange_weak(seen, seen + bytes));
  of_[kind] += bytes;
  used_ += bytes;
  UpdatePeaksLocked();
  return true;
}

void MemoryBudget::BookLocked(Kind kind, int64_t bytes) {
  CountLocked(kind, bytes);
  UpdatePeaksLocked();
}

void MemoryBudget::CountLocked(Kind kind, int64_t bytes) {
  of_[kind] += bytes;
  if (kind != kIdle) used_ += bytes;
  if (group_) (kind == kIdle ? group_->idle : group_->used).fetch_add(bytes);
}

void MemoryBudget::UpdatePeaksLocked() {
  peak_ = std::max(peak_, used_);
  for (int k = 0; k < kKinds; ++k) peak_of_[k] = std::max(peak_of_[k], of_[k]);
  if (group_) {
    const int64_t now = group_->used.load();
    int64_t seen = group_->peak.load();
    while (now > seen && !group_->peak.compare_exchange_weak(seen, now)) {
    }
  }
}

}  // namespace shardfeed
