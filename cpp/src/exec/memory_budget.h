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
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>

namespace shardfeed {

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

  explicit MemoryBudget(int64_t limit) : limit_(limit < 0 ? 0 : limit) {}

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
    if (Fits(bytes)) {
      BookLocked(kind, bytes);
      return true;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ++waits_;
    bool abandoned = false;
    changed_.wait(lock, [&] {
      if (stopped_ || Fits(bytes) || urgent()) return true;
      abandoned = abandon();
      return abandoned;
    });
    wait_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (stopped_ || abandoned) return false;
    if (!Fits(bytes)) ++urgent_over_limit_;
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
  bool Fits(int64_t bytes) const { return limit_ == 0 || used_ + bytes <= limit_; }
  void BookLocked(Kind kind, int64_t bytes);
  void UpdatePeaksLocked();

  const int64_t limit_;
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
