// The engine's memory budget, EngineOptions::memory_limit (internal).
//
// Every byte the engine holds is booked under one kind: reserved for a row
// group being decoded (its compressed read buffers, Arrow's arrays and the
// stack matrix built from them, estimated from the footer before the read),
// held by a decoded row group (measured once decoded), held by a built
// batch that the consumer has not taken yet.  Apart from those, and not in
// `used` nor `peak`: idle bytes, freed stack matrices kept for the next
// decode (MatrixPool).  The decode that reserves takes one rather than
// allocating it, so idle bytes are memory its reservation already counts;
// the pool frees them when a decode needs another size while booked and idle
// bytes together are over the limit (Excess).  A worker that is about to
// decode waits until its reservation fits under the limit, unless its row
// group is needed by the consumer's next unit (`urgent`): that one always goes
// ahead, so the budget can slow the engine down but never stop it.
//
// The engines of one stream (a Loader's passes: EngineLeftovers) share a
// BudgetGroup: each checks the limit against what all of them book, so the
// next pass's engine, started while this one serves its last window, decodes
// only into the room this one leaves.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace shardfeed {

class MemoryBudget;

// What the budgets of one group book together, and who waits on them.
class BudgetGroup {
 public:
  // Adds `budget` to those woken when another member gives bytes back.
  void Join(const std::shared_ptr<MemoryBudget>& budget);
  // Wakes the members other than `self` (none of whose locks the caller holds).
  void WakeOthers(const MemoryBudget* self);

  std::atomic<int64_t> used{0};  // booked by every member, idle bytes apart
  std::atomic<int64_t> idle{0};
  std::atomic<int64_t> peak{0};  // most of `used` at once

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<MemoryBudget>> members_;
};

class MemoryBudget {
 public:
  enum Kind { kDecoding = 0, kDecoded = 1, kBatches = 2, kIdle = 3 };
  static constexpr int kKinds = 4;

  struct Snapshot {
    int64_t limit = 0;  // 0: unlimited
    int64_t used = 0;
    int64_t peak = 0;                       // most bytes booked at once, kinds but kIdle together
    std::array<int64_t, kKinds> peak_of{};  // the most of each kind at once
    std::array<int64_t, kKinds> of{};       // booked now, per kind
    int64_t waits = 0;                      // reservations that had to wait
    double wait_seconds = 0;
    int64_t urgent_over_limit = 0;  // reservations that went past the limit
  };

  // `group`: the budgets this one shares its limit with (null: none); the
  // owner then calls group->Join with the shared_ptr that holds this one.
  explicit MemoryBudget(int64_t limit, std::shared_ptr<BudgetGroup> group = nullptr)
      : limit_(limit < 0 ? 0 : limit), group_(std::move(group)) {}

  int64_t limit() const { return limit_; }

  // Books `bytes` if they fit (always, without a limit); false otherwise.
  bool TryReserve(Kind kind, int64_t bytes);

  // Books `bytes`, first waiting until they fit.  `urgent()` and `abandon()`
  // are asked (under the budget's lock, so they must not take the budget's
  // lock, nor any lock held while the budget's is taken) each time the budget
  // changes or Wake() is called: once urgent() is true the bytes are booked at
  // once, over the limit if need be; once abandon() is, nothing is booked.
  // False, with nothing booked, when the budget is stopped or abandon() said so.
  template <typename Urgent, typename Abandon>
  bool Reserve(Kind kind, int64_t bytes, Urgent&& urgent, Abandon&& abandon) {
    std::unique_lock<std::mutex> lock(mu_);
    if (TryBookLocked(kind, bytes)) return true;
    const auto t0 = std::chrono::steady_clock::now();
    ++waits_;
    bool booked = false, abandoned = false;
    changed_.wait(lock, [&] {
      if (stopped_) return true;
      booked = TryBookLocked(kind, bytes);
      if (booked || urgent()) return true;
      abandoned = abandon();
      return abandoned;
    });
    wait_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (booked) return true;
    if (stopped_ || abandoned) return false;
    ++urgent_over_limit_;
    BookLocked(kind, bytes);
    return true;
  }
  template <typename Urgent>
  bool Reserve(Kind kind, int64_t bytes, Urgent&& urgent) {
    return Reserve(kind, bytes, std::forward<Urgent>(urgent), [] { return false; });
  }

  // Books `bytes` whatever the limit (what is already held, e.g. a built batch).
  void Add(Kind kind, int64_t bytes);
  // Gives back bytes booked earlier under `kind`.
  void Release(Kind kind, int64_t bytes);
  // Turns a reservation into what it became: `from_bytes` of `from` released,
  // `to_bytes` of `to` booked, with one peak update.
  void Convert(Kind from, int64_t from_bytes, Kind to, int64_t to_bytes);
  // Something that `urgent` reads has changed: waiters look again.
  void Wake();
  // Wakes every waiter for good; Reserve then returns false.
  void Stop();
  // Booked and idle bytes over the limit (0 under it or without a limit).
  int64_t Excess() const;
  // The limit less booked and idle bytes (0 over it; INT64_MAX without a
  // limit); without `with_batches`, built batches do not count (the consumer
  // takes them soon, and they go to the recycler only while there is room).
  int64_t Room(bool with_batches = true) const;

  Snapshot snapshot() const;

 private:
  // (No exception for an empty budget: a decode ahead larger than the limit
  // waits until it is the next batch's, which is urgent.)
  // Books `bytes` if they fit under the limit with what the group books (an
  // exact test: two members cannot both take the last room).
  bool TryBookLocked(Kind kind, int64_t bytes);
  void BookLocked(Kind kind, int64_t bytes);
  // The local counts and the group's (under mu_).
  void CountLocked(Kind kind, int64_t bytes);
  void UpdatePeaksLocked();
  // Booked (or idle) bytes: the group's where there is one.
  int64_t UsedLocked() const { return group_ ? group_->used.load() : used_; }
  int64_t IdleLocked() const { return group_ ? group_->idle.load() : of_[kIdle]; }
  void WakeGroup() {
    if (group_) group_->WakeOthers(this);
  }

  const int64_t limit_;
  const std::shared_ptr<BudgetGroup> group_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  int64_t used_ = 0;
  std::array<int64_t, kKinds> of_{};
  int64_t peak_ = 0;
  std::array<int64_t, kKinds> peak_of_{};
  int64_t waits_ = 0;
  int64_t wait_ns_ = 0;
  int64_t urgent_over_limit_ = 0;
  bool stopped_ = false;
};

}  // namespace shardfeed
