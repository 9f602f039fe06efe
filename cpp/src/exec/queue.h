// A bounded blocking queue with a stop switch: each engine worker owns one.
// No polling: producers and the consumer sleep on condition variables, and
// Stop() wakes everybody.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace shardfeed {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Blocks while full.  Returns false (dropping the item) once stopped.
  bool Push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return stopped_ || items_.size() < capacity_; });
    if (stopped_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty.  Returns nullopt once stopped.
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return stopped_ || !items_.empty(); });
    if (stopped_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Like Pop(), but gives up after `wait` with *timed_out set (and nullopt), so
  // that the consumer can look for signals between waits.
  template <typename Duration>
  std::optional<T> PopFor(Duration wait, bool* timed_out) {
    std::unique_lock<std::mutex> lock(mu_);
    *timed_out = !not_empty_.wait_for(lock, wait, [&] { return stopped_ || !items_.empty(); });
    if (stopped_ || *timed_out) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // True if Push() would block now.
  bool Full() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !stopped_ && items_.size() >= capacity_;
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    items_.clear();
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool stopped_ = false;
};

}  // namespace shardfeed
