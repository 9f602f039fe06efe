// The prefetcher: one thread that follows the plan's file order ahead of the
// consumer.  It sleeps on a condition variable whenever it must not go on
// (window full, no room, list done) and wakes on Advance() or Stop().
#include <algorithm>
#include <climits>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "cache/file_cache.h"
#include "shardfeed/cache.h"
#include "util/live_threads.h"

namespace shardfeed {

namespace {

// The order and the consumer position, shared with NextUse() functions that
// may outlive the prefetcher (they must not keep the cache alive: the cache
// holds them).
struct Order {
  std::unordered_map<std::string, size_t> index;  // key -> first position
  std::atomic<size_t> consumer{0};
};

}  // namespace

struct Prefetcher::State {
  std::shared_ptr<FileCache> cache;
  std::shared_ptr<arrow::fs::FileSystem> fs;
  std::vector<RemoteFileInfo> files;
  std::vector<int64_t> prefix;  // prefix[i]: bytes of files[0, i)
  int64_t bytes_ahead = 0;
  std::shared_ptr<Order> order;
  storage_internal::Interrupt interrupt;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  size_t consumer = 0;
  size_t next = 0;  // the next file to consider
  bool stop = false;
  bool idle = false;
  arrow::Status first_error;

  // Whether files[i] is within `bytes_ahead` of the consumer.
  bool InWindow(size_t i) const {
    return i <= consumer || prefix[i + 1] - prefix[consumer + 1] <= bytes_ahead;
  }
};

Prefetcher::Prefetcher(std::shared_ptr<FileCache> cache, std::shared_ptr<arrow::fs::FileSystem> fs,
                       std::vector<RemoteFileInfo> files, int64_t bytes_ahead)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.cache = std::move(cache);
  s.fs = std::move(fs);
  s.files = std::move(files);
  s.bytes_ahead = std::max<int64_t>(0, bytes_ahead);
  s.order = std::make_shared<Order>();
  s.prefix.assign(s.files.size() + 1, 0);
  for (size_t i = 0; i < s.files.size(); ++i) {
    s.prefix[i + 1] = s.prefix[i] + s.files[i].size;
    s.order->index.emplace(s.files[i].key, i);
  }
  thread_ = std::thread([this, live = LiveThreadGuard::Start()] { Run(); });
}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::Advance(size_t index) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (index <= s.consumer) return;
    s.consumer = index;
    s.order->consumer.store(index, std::memory_order_release);
    s.idle = false;  // the thread decides again
  }
  s.cv.notify_all();
}

void Prefetcher::Stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.interrupt.Request();  // wakes a backoff, ends a download at the next chunk
  s.cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::function<int64_t(const std::string&)> Prefetcher::NextUse() const {
  return [order = state_->order](const std::string& key) -> int64_t {
    auto it = order->index.find(key);
    if (it == order->index.end()) return INT64_MAX;
    if (it->second < order->consumer.load(std::memory_order_acquire)) return INT64_MAX;
    return static_cast<int64_t>(it->second);
  };
}

bool Prefetcher::WaitUntilIdle(double timeout_seconds) const {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  return s.cv.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                       [&] { return s.idle || s.stop; });
}

size_t Prefetcher::done() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->next;
}

arrow::Status Prefetcher::first_error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->first_error;
}

void Prefetcher::Run() {
  using Impl = FileCache::Impl;
  State& s = *state_;
  Impl& cache = *s.cache->impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  // The consumer position when the cache was full (kNever: it was not).
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  size_t no_room_at = kNever;
  while (!s.stop) {
    s.next = std::max(s.next, s.consumer);  // files the consumer passed are not needed
    const bool full = no_room_at != kNever && no_room_at == s.consumer;
    if (s.next >= s.files.size() || full || !s.InWindow(s.next)) {
      s.idle = true;
      s.cv.notify_all();
      s.cv.wait(lock);
      continue;
    }
    no_room_at = kNever;
    const size_t index = s.next;
    const size_t consumer = s.consumer;
    lock.unlock();
    auto fetched = cache.Fetch(s.fs, s.files[index], Impl::Purpose::kWarm,
                               storage_internal::LockWait::kNoWait, &s.interrupt);
    lock.lock();
    if (s.stop) break;
    if (!fetched.ok()) {
      if (s.first_error.ok()) s.first_error = fetched.status();
    } else if (fetched->outcome == Impl::Outcome::kNoRoom) {
      // Room appears when the consumer moves on (unpins, passes files).
      no_room_at = consumer;
      continue;
    }
    ++s.next;  // cached, being filled by someone else, uncacheable, or failed
  }
  s.idle = true;
  s.cv.notify_all();
}

}  // namespace shardfeed
