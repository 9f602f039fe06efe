// Units of work built by any worker, handed to the consumer in unit order.
// No polling: workers and the consumer sleep on condition variables, and
// Stop() wakes everybody.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace shardfeed {

template <typename T>
class ReorderBuffer {
 public:
  // Units 0 .. num_units - 1; workers may claim a unit only while it is fewer
  // than `capacity` units ahead of the consumer, so at most capacity + (the
  // number of workers) items exist at once.
  ReorderBuffer(int64_t num_units, int64_t capacity)
      : num_units_(num_units), capacity_(capacity < 1 ? 1 : capacity) {}

  // The next unit to build, in order; -1 once every unit is claimed or the
  // buffer is stopped.  While the buffer is full it calls help(unit), the unit
  // it would hand out next, outside the lock (to work ahead: true if it did
  // some), and sleeps until there is room when help did nothing; the time
  // slept is added to *waited_ns.
  //
  // Take() wakes one sleeper, for the one unit it made room for: waking them
  // all cost the consumer's next() about 7 us per thread.  The others still
  // get to look for work ahead, woken in a chain by the workers: one that
  // claims after a sleep, or that found work ahead, wakes one more.
  template <typename Help>
  int64_t Claim(Help&& help, int64_t* waited_ns) {
    std::unique_lock<std::mutex> lock(mu_);
    bool slept = false;
    for (;;) {
      if (stopped_ || next_claim_ >= num_units_) return -1;
      if (next_claim_ < taken_ + capacity_) {
        const int64_t unit = next_claim_++;
        if (slept) WakeOneToLookLocked();
        return unit;
      }
      const int64_t ahead = next_claim_;
      lock.unlock();
      const bool helped = help(ahead);
      lock.lock();
      if (helped) {
        WakeOneToLookLocked();
        continue;
      }
      slept = true;
      const int64_t look = look_;
      const auto t0 = std::chrono::steady_clock::now();
      room_.wait(lock, [&] {
        return stopped_ || next_claim_ >= num_units_ || next_claim_ < taken_ + capacity_ ||
               look_ != look;
      });
      *waited_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    }
  }

  // Hands in the item of a claimed unit (dropped once stopped).  Wakes the
  // consumer only with the unit it waits for: a wake-up for a later unit would
  // only take a CPU from the workers.
  void Put(int64_t unit, T item) {
    bool wanted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      built_.emplace(unit, std::move(item));
      wanted = unit == taken_;
    }
    if (wanted) built_cv_.notify_all();
  }

  // The item of the next unit in order, waiting for it (at most *wait when
  // given, then nullopt with *timed_out set); nullopt once stopped.
  std::optional<T> Take(const std::chrono::milliseconds* wait, bool* timed_out) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return stopped_ || built_.count(taken_) > 0; };
    if (wait) {
      *timed_out = !built_cv_.wait_for(lock, *wait, ready);
      if (*timed_out) return std::nullopt;
    } else {
      built_cv_.wait(lock, ready);
    }
    if (stopped_) return std::nullopt;
    auto it = built_.find(taken_);
    T item = std::move(it->second);
    built_.erase(it);
    ++taken_;
    lock.unlock();
    room_.notify_one();  // one claim's room (see Claim)
    return item;
  }

  void Stop() {
    std::map<int64_t, T> dropped;  // destroyed after the lock: an item's
                                   // destructor may take other locks
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      dropped.swap(built_);
    }
    room_.notify_all();
    built_cv_.notify_all();
  }

  // Items built and not yet taken.
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return built_.size();
  }

 private:
  // Lets one sleeping worker out of Claim's wait to look for work ahead.
  void WakeOneToLookLocked() {
    ++look_;
    room_.notify_one();
  }

  const int64_t num_units_;
  const int64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable room_;      // workers wait for the consumer
  std::condition_variable built_cv_;  // the consumer waits for its next unit
  std::map<int64_t, T> built_;
  int64_t next_claim_ = 0;
  int64_t taken_ = 0;
  int64_t look_ = 0;  // bumped to send one sleeper to look for work ahead
  bool stopped_ = false;
};

}  // namespace shardfeed
