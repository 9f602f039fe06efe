#include "shardfeed/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exec/assemble.h"
#include "exec/batch_recycler.h"
#include "exec/decode.h"
#include "exec/footprint.h"
#include "exec/leftovers.h"
#include "exec/memory_budget.h"
#include "exec/reorder.h"
#include "exec/stage_clock.h"
#include "exec/tier_entry.h"
#include "plan/schedule.h"
#include "shardfeed/cache.h"
#include "shardfeed/status.h"
#include "transform/layout.h"
#include "util/deadline_file.h"
#include "util/live_threads.h"
#include "util/thread_policy.h"

namespace shardfeed {

namespace {

using Clock = std::chrono::steady_clock;

// Decoded row groups shared by the workers, grouped by mixing window.  A
// window's row groups are dropped once every unit that overlaps the window has
// been assembled, so memory follows the in-flight units, not the dataset.
class RowGroupStore {
 public:
  struct Slot {
    bool loading = true;
    arrow::Status status;
    std::shared_ptr<const DecodedRowGroup> data;
    std::shared_ptr<SharedWork> work;  // parts of the decode that waiters may take
  };

  // Returns the decoded row group, decoding it here if no one else is:
  // `reserve()` first books its memory (false: the loader stopped, or another
  // worker made the slot meanwhile: Decoding() says so), then `decode(slot)`
  // runs (it may offer parts of the decode in the slot: Offer); when another
  // worker made the slot meanwhile the booking goes back through
  // `unreserve()`.  While another worker decodes it, this one takes the parts
  // offered, then `help(soon)` may decode a row group needed soon (returning
  // true if it did; `soon`: the decode waited for is about to end) instead of
  // idling.  The slot is made only once the memory is booked: a worker that
  // waits for memory holds no slot that the consumer's next unit could be
  // waiting on.
  template <typename ReserveFn, typename UnreserveFn, typename DecodeFn, typename HelpFn>
  arrow::Result<std::shared_ptr<const DecodedRowGroup>> Get(int64_t window, int64_t uses,
                                                            int32_t rg, ReserveFn&& reserve,
                                                            UnreserveFn&& unreserve,
                                                            DecodeFn&& decode, HelpFn&& help) {
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Slot> slot;  // keeps the slot alive if the window is released
    if (auto it = Entry(window, uses).slots.find(rg); it != Entry(window, uses).slots.end()) {
      slot = it->second;
    } else {
      lock.unlock();
      const bool booked = reserve();
      lock.lock();
      auto& entry = Entry(window, uses);
      if (auto again = entry.slots.find(rg); again != entry.slots.end()) {
        slot = again->second;
        if (booked) {
          lock.unlock();
          unreserve();
          lock.lock();
        }
      } else if (!booked) {
        return arrow::Status::Cancelled("loader stopped");
      } else {
        slot = std::make_shared<Slot>();
        entry.slots.emplace(rg, slot);
        Made(window, rg);
        lock.unlock();
        auto result = decode(slot);
        Fill(slot, result);
        return result;
      }
    }
    auto offered = [&] { return slot->work && slot->work->has_work(); };
    while (slot->loading && !stopped_) {
      if (offered()) {
        const auto work = slot->work;
        lock.unlock();
        while (work->RunOne()) helped_parts_.fetch_add(1);
        lock.lock();
        continue;
      }
      // Every part taken, the decode ends soon: a row group of the next
      // window decoded now would delay this worker's own unit by as much.
      const bool soon = slot->work != nullptr;
      lock.unlock();
      const bool helped = help(soon);
      lock.lock();
      if (!helped) ready_.wait(lock, [&] { return !slot->loading || stopped_ || offered(); });
    }
    if (slot->loading) return arrow::Status::Cancelled("loader stopped");
    if (!slot->status.ok()) return slot->status;
    return slot->data;
  }

  RowGroupStore(int64_t num_windows, size_t num_row_groups)
      : released_(static_cast<size_t>(std::max<int64_t>(num_windows, 0)), false),
        decoding_(new std::atomic<int64_t>[num_row_groups]()) {}

  // Whether `window` has a slot for `rg` now (lock-free: asked under the
  // memory budget's lock).
  bool Decoding(int64_t window, int32_t rg) const {
    return decoding_[static_cast<size_t>(rg)].load() == window + 1;
  }

  // Whether Claim(window, ..., rg) would make a slot now.
  bool Claimable(int64_t window, int32_t rg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || released_[static_cast<size_t>(window)]) return false;
    auto it = windows_.find(window);
    return it == windows_.end() || it->second.slots.count(rg) == 0;
  }

  // Creates the slot of `rg` if nobody has; the caller must then decode and
  // Fill it.  Null for a released window: decoding ahead, a worker may ask
  // for a window whose units others have meanwhile all built (any worker
  // builds any unit), and an entry made again would never be released.
  std::shared_ptr<Slot> Claim(int64_t window, int64_t uses, int32_t rg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || released_[static_cast<size_t>(window)]) return nullptr;
    auto& entry = Entry(window, uses);
    if (entry.slots.count(rg)) return nullptr;
    auto slot = std::make_shared<Slot>();
    entry.slots.emplace(rg, slot);
    Made(window, rg);
    return slot;
  }

  // Parts of the slot's decode for the workers waiting for it to take, and
  // for any worker with nothing better to do (RunOfferedPart).
  void Offer(int64_t window, const std::shared_ptr<Slot>& slot, std::shared_ptr<SharedWork> work) {
    std::lock_guard<std::mutex> lock(mu_);
    offers_parts_.store(true);
    offers_.push_back({window, work});
    slot->work = std::move(work);
    ready_.notify_all();
  }

  // Runs one part of any decode in progress that offers one, the earliest
  // window's first; false if none does.  A part is short (16 columns of one
  // row group): a worker with room to build a unit is back to it soon, where
  // a whole row group decoded ahead kept it away for as long as the consumer
  // took to drain the ready batches.
  bool RunOfferedPart() {
    std::shared_ptr<SharedWork> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      int64_t first = -1;
      for (const auto& [window, offered] : offers_) {
        if (offered->has_work() && (first < 0 || window < first)) {
          first = window;
          work = offered;
        }
      }
    }
    if (!work || !work->RunOne()) return false;
    helped_parts_.fetch_add(1);
    return true;
  }

  void Fill(const std::shared_ptr<Slot>& slot,
            const arrow::Result<std::shared_ptr<const DecodedRowGroup>>& result) {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot->work) {
      std::erase_if(offers_, [&](const Offered& o) { return o.work == slot->work; });
      slot->work.reset();
    }
    if (result.ok()) {
      slot->data = *result;
    } else {
      slot->status = result.status();
    }
    slot->loading = false;
    ready_.notify_all();
  }

  // One unit overlapping `window` is done with it.
  void Release(int64_t window, int64_t uses) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& entry = Entry(window, uses);
    if (--entry.remaining <= 0) {
      for (const auto& [rg, slot] : entry.slots) decoding_[static_cast<size_t>(rg)].store(0);
      windows_.erase(window);
      released_[static_cast<size_t>(window)] = true;
    }
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    ready_.notify_all();
  }

  // Drops every decoded row group (once no worker is left).
  void Clear() {
    std::map<int64_t, WindowEntry> windows;  // destroyed after the lock: the
                                             // row groups' deleters take others
    {
      std::lock_guard<std::mutex> lock(mu_);
      windows.swap(windows_);
      offers_.clear();
    }
  }

  // Parts of other workers' decodes run by workers waiting for them.
  int64_t helped_parts() const { return helped_parts_.load(); }
  // Whether any decode has offered parts (a stack's tile reads).
  bool offers_parts() const { return offers_parts_.load(); }

 private:
  // (Under the lock.)
  void Made(int64_t window, int32_t rg) { decoding_[static_cast<size_t>(rg)].store(window + 1); }

  struct Offered {
    int64_t window;
    std::shared_ptr<SharedWork> work;
  };
  struct WindowEntry {
    int64_t remaining = 0;
    std::unordered_map<int32_t, std::shared_ptr<Slot>> slots;
  };
  WindowEntry& Entry(int64_t window, int64_t uses) {
    auto [it, inserted] = windows_.try_emplace(window);
    if (inserted) it->second.remaining = uses;
    return it->second;
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::map<int64_t, WindowEntry> windows_;
  std::vector<Offered> offers_;  // the decodes in progress that offer parts
  std::vector<bool> released_;   // per window: every unit overlapping it is done
  std::atomic<int64_t> helped_parts_{0};
  std::atomic<bool> offers_parts_{false};
  // Per row group: 1 + the window whose slot for it exists, 0 for none.
  std::unique_ptr<std::atomic<int64_t>[]> decoding_;
  bool stopped_ = false;
};

// Runs `fn` at the engine's thread boundary: an exception (std::bad_alloc from
// a size no check caught, a throw inside Arrow) becomes an error naming `what`
// instead of terminating the process.
template <typename Fn>
auto Guarded(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return arrow::Status::OutOfMemory(what + ": out of memory");
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInvalidData, what + ": " + e.what());
  }
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::shared_ptr<const Catalog> catalog, std::shared_ptr<const Schedule> schedule,
             EngineOptions options, Layout layout)
      : catalog_(std::move(catalog)),
        schedule_(std::move(schedule)),
        options_(std::move(options)),
        layout_(std::move(layout)),
        clock_(std::make_shared<StageClock>(options_.trace)),
        num_threads_(std::max(1, options_.num_threads)),
        footprints_(Footprints(catalog_, layout_)),
        budget_(std::make_shared<MemoryBudget>(
            options_.memory_limit,
            options_.leftovers ? options_.leftovers->impl().group : nullptr)),
        batch_bytes_(
            EstimateBatchBytes(*footprints_, *catalog_, schedule_->plan().options().batch_size)),
        capacity_(ReadyBatchCapacity(batch_bytes_, num_threads_, options_.queue_depth,
                                     options_.memory_limit)),
        store_(schedule_->num_windows(), catalog_->row_groups().size()),
        built_(schedule_->num_units(), capacity_) {
    if (options_.leftovers) options_.leftovers->impl().group->Join(budget_);
    hooks_.clock = clock_;
    hooks_.tier = options_.decoded_tier;
    // A window's matrices are freed together: keep as many as fit in half
    // the limit (at most kIdleMatrices, or one of any size) for the decodes
    // that follow.
    constexpr int kIdleMatrices = 4;
    hooks_.matrices =
        std::make_shared<MatrixPool>(budget_, kIdleMatrices, options_.memory_limit / 2);
    // Batch buffers come back from the consumer to a recycler (unless they are
    // the caller's pinned memory): idle, at most what the ready batches take
    // (size classes round up by an eighth), and at least a sixteenth of the
    // limit.  The blocks are the ready batches' own: keeping as many idle does
    // not add to the most that exist at once, and with a sixteenth of
    // bench_core's limit (5 of its 20 ready batches) every window boundary,
    // where the ready batches drain and fill again, freed blocks and faulted
    // in fresh ones.
    arena_ = options_.output_arena;
    if (!arena_) {
      constexpr int64_t kIdleBatchBytesUnlimited = int64_t{64} << 20;
      const int64_t ready = capacity_ * batch_bytes_ + capacity_ * batch_bytes_ / 8;
      recycler_ = std::make_shared<BatchRecycler>(
          budget_, std::max(ready, options_.memory_limit > 0 ? options_.memory_limit / 16
                                                             : kIdleBatchBytesUnlimited));
      arena_ = recycler_;
    }
    if (options_.leftovers) {
      auto& left = options_.leftovers->impl();
      std::lock_guard<std::mutex> lock(left.mu);
      hooks_.matrices->UseShelf(left.matrices);
      hooks_.matrices->Adopt();
      if (recycler_) recycler_->Adopt(&left.batch_blocks);
    }
    // A fresh process (nothing adopted) writes the matrices of the first two
    // windows now, on all the threads, before the first batch: their decodes
    // would fault in fresh pages while the consumer waits (measured on a VM:
    // the second window's row groups took 100-235 ms instead of 35 in a third
    // of the fresh runs, the same faults at twice the kernel time).
    if (hooks_.matrices->counts().idle_bytes == 0) {
      // (Room: what the other engines of the budget's group hold counts.)
      const int64_t room = options_.memory_limit > 0 ? budget_->Room() - capacity_ * batch_bytes_
                                                     : std::numeric_limits<int64_t>::max();
      if (room > 0) hooks_.matrices->Prefault(FirstMatrixSizes(), room, num_threads_);
    }
    // And the blocks of the ready batches and of those being built, which the
    // recycler keeps from then on: the first window's batches faulted them in
    // while the second window's decode waited for the workers.
    if (recycler_ && recycler_->counts().idle_bytes == 0) {
      // (No more than the pass has: 12 batches made 520 buffers of 4 MiB with
      // prefetch=64, 2 GiB of pages never used.)
      recycler_->Prefault(FullBatchArraySizes(),
                          std::min<int64_t>(capacity_ + num_threads_, schedule_->num_units()),
                          num_threads_);
    }
    hooks_.map_stored = schedule_->plan().options().global_shuffle;
    hooks_.memory_limit = budget_->limit();
    hooks_.filter = options_.filter;
    if (!catalog_->is_local()) hooks_.io_stage = Stage::kFetch;
    hooks_.slow_stage = options_.debug_slow_stage;
    hooks_.slow_us = options_.debug_slow_us;
    hooks_.remote_timeout = options_.remote_timeout;
    hooks_.verify_page_checksums = options_.verify_page_checksums;
    hooks_.stop = &stop_;
    hooks_.help = [this] { return HelpWhileLocked(); };
    if (schedule_->num_units() > 0) {
      // The last window this engine's units read: a rank (or a resume) may end
      // before the epoch's last window.
      last_window_ = schedule_->UnitWindows(schedule_->num_units() - 1).last;
      last_window_needed_ = static_cast<int64_t>(schedule_->NeededRowGroups(last_window_).size());
    }
    const int n = num_threads_;
    if (options_.file_cache && !catalog_->is_local()) UseFileCache();
    for (int w = 0; w < n; ++w)
      threads_.emplace_back([this, w, live = LiveThreadGuard::Start()] { Work(w); });
  }

  ~EngineImpl() override { Stop(); }

  // The bytes of the arrays of the first batch (variable-length lists left
  // out: their size depends on the rows).
  std::vector<size_t> FullBatchArraySizes() const {
    std::vector<size_t> sizes;
    const EpochPlan& plan = schedule_->plan();
    if (schedule_->num_units() == 0 || plan.num_batches() == 0) return sizes;
    const auto rows = static_cast<size_t>(plan.BatchSize(0));
    for (const auto& output : layout_.outputs) {
      if (output.kind == OutputKind::kList) continue;
      const DType dtype = output.kind == OutputKind::kSampleId ? DType::kInt64 : output.dtype;
      sizes.push_back(rows * static_cast<size_t>(output.width) * DTypeSize(dtype));
    }
    return sizes;
  }

  // The stack matrices of the row groups of the first two windows the units
  // read, in the order they are needed (none where decodes may not make them
  // from the pool: a filter changes their rows, a decoded tier may map them).
  std::vector<int64_t> FirstMatrixSizes() const {
    std::vector<int64_t> sizes;
    if (schedule_->num_units() == 0 || options_.filter || options_.decoded_tier) return sizes;
    const int64_t first = schedule_->UnitWindows(0).first;
    const int64_t end = std::min(first + 2, schedule_->num_windows());
    for (int64_t w = first; w < end; ++w) {
      for (int32_t rg : schedule_->NeededRowGroups(w)) {
        const int64_t rows = catalog_->row_groups()[static_cast<size_t>(rg)].num_rows;
        for (const auto& plan : layout_.outputs) {
          if (plan.kind != OutputKind::kStack) continue;
          sizes.push_back(rows * plan.width * static_cast<int64_t>(DTypeSize(plan.matrix_dtype)));
        }
      }
    }
    return sizes;
  }

  arrow::Result<std::shared_ptr<Batch>> Next() override { return NextImpl(nullptr, nullptr); }

  arrow::Result<std::shared_ptr<Batch>> NextWithin(std::chrono::milliseconds wait,
                                                   bool* timed_out) override {
    return NextImpl(&wait, timed_out);
  }

  arrow::Result<std::shared_ptr<Batch>> NextImpl(const std::chrono::milliseconds* wait,
                                                 bool* timed_out) {
    std::lock_guard<std::mutex> lock(consumer_mu_);
    if (timed_out) *timed_out = false;
    if (!error_.ok()) return error_;
    if (next_unit_ >= schedule_->num_units()) return nullptr;
    if (!consumer_started_.load()) {
      // From now on the consumer's next unit is urgent (see BuildUnit).
      consumer_started_.store(true);
      budget_->Wake();
    }
    const auto t0 = Clock::now();
    bool expired = false;
    auto item = built_.Take(wait, &expired);
    if (timed_out) *timed_out = expired;
    clock_->Add(Stage::kWaitEmpty, t0, 0, 0, next_unit_);
    if (timed_out && *timed_out) return nullptr;
    if (!item) {
      error_ = arrow::Status::Cancelled("the loader was closed");
      return error_;
    }
    ++next_unit_;
    consumer_unit_.store(next_unit_);
    // The consumer's next unit has moved on: waiters look again (Release wakes
    // them too; one wake-up, not two, is what next() pays).
    if (item->ok() && **item) {
      budget_->Release(MemoryBudget::kBatches, BatchBytes(***item));
    } else {
      budget_->Wake();
    }
    if (!item->ok()) {
      error_ = item->status();
      StopWorkers();
      return error_;
    }
    batches_ += 1;
    rows_delivered_ += (**item)->num_rows;
    return std::move(*item);
  }

  void Cancel() override {
    // StopWorkers() less the prefetcher's Stop(), which joins its thread.
    stop_.store(true);
    store_.Stop();
    budget_->Stop();
    built_.Stop();
  }

  void Stop() override {
    StopWorkers();
    std::lock_guard<std::mutex> lock(join_mu_);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    if (options_.leftovers && !left_) {
      // The idle matrices and batch buffers (those of the row groups still
      // held too) go to the next engine, not back to the allocator.
      left_ = true;
      store_.Clear();
      auto& left = options_.leftovers->impl();
      std::lock_guard<std::mutex> hand(left.mu);
      hooks_.matrices->Surrender();
      if (recycler_) recycler_->Surrender(&left.batch_blocks);
    }
  }

  int64_t num_units() const override { return schedule_->num_units(); }
  int64_t memory_held() const override {
    const auto m = budget_->snapshot();
    return m.used + m.of[MemoryBudget::kIdle];
  }
  bool decodes_started() const override {
    return last_window_decodes_.load() >= last_window_needed_;
  }

  std::vector<TraceRecord> trace() const override {
    std::vector<TraceRecord> out;
    for (const auto& e : clock_->trace()) {
      out.push_back({e.worker, StageName(e.stage), static_cast<double>(e.start_ns) * 1e-3,
                     static_cast<double>(e.duration_ns) * 1e-3, e.arg});
    }
    return out;
  }

  EngineStats stats() const override {
    EngineStats s;
    s.row_groups_decoded = row_groups_decoded_;
    s.rows_decoded = rows_decoded_;
    s.bytes_decoded = bytes_decoded_;
    s.stack_columns_tiled = clock_->stack_columns_tiled();
    s.stack_columns_generic = clock_->stack_columns_generic();
    s.decode_parts_shared = store_.helped_parts();
    s.batches = batches_;
    s.rows_delivered = rows_delivered_;
    s.threads = num_threads_;
    s.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    for (int i = 0; i < kBusyStages; ++i) {
      const auto stage = static_cast<Stage>(i);
      s.stages.push_back({StageName(stage), static_cast<double>(clock_->ns(stage)) * 1e-9,
                          clock_->bytes(stage), clock_->rows(stage)});
    }
    s.worker_wait_seconds = static_cast<double>(clock_->ns(Stage::kWaitFull)) * 1e-9;
    s.consumer_wait_seconds = static_cast<double>(clock_->ns(Stage::kWaitEmpty)) * 1e-9;
    std::lock_guard<std::mutex> lock(stats_mu_);
    s.decoded_row_groups = decoded_list_;
    s.peak_live_row_groups = live_->peak.load();
    const auto m = budget_->snapshot();
    s.memory_limit = m.limit;
    s.memory_peak = m.peak;
    s.memory_used = m.used;
    s.memory_peak_decoding = m.peak_of[MemoryBudget::kDecoding];
    s.memory_peak_decoded = m.peak_of[MemoryBudget::kDecoded];
    s.memory_peak_batches = m.peak_of[MemoryBudget::kBatches];
    s.memory_peak_idle = m.peak_of[MemoryBudget::kIdle];
    s.memory_peak_together =
        options_.leftovers ? options_.leftovers->impl().group->peak.load() : m.peak;
    const auto pooled = hooks_.matrices->counts();
    s.matrices_reused = pooled.reused;
    s.matrices_allocated = pooled.allocated;
    s.matrices_prefaulted = pooled.prefaulted;
    if (recycler_) {
      const auto recycled = recycler_->counts();
      s.batch_buffers_reused = recycled.reused;
      s.batch_buffers_allocated = recycled.allocated;
      s.batch_buffers_prefaulted = recycled.prefaulted;
    }
    s.memory_waits = m.waits;
    s.memory_wait_seconds = m.wait_seconds;
    s.memory_over_limit = m.urgent_over_limit;
    s.ready_batches_capacity = capacity_;
    return s;
  }

 private:
  using Item = arrow::Result<std::shared_ptr<Batch>>;

  // Remote files through the node-local cache, fetched ahead in the order in
  // which this engine first needs them.
  void UseFileCache() {
    const auto& files = catalog_->files();
    std::vector<int32_t> file_of_rg;
    for (const auto& rg : catalog_->row_groups()) file_of_rg.push_back(rg.file);
    file_position_.assign(files.size(), -1);
    std::vector<RemoteFileInfo> order;
    for (int32_t file : schedule_->FileFirstUseOrder(file_of_rg)) {
      const auto f = static_cast<size_t>(file);
      file_position_[f] = static_cast<int64_t>(order.size());
      order.push_back({CacheKey(*catalog_, file), files[f].path, files[f].size, files[f].version});
    }
    remote_files_ = order;
    prefetcher_ = std::make_unique<Prefetcher>(options_.file_cache, catalog_->filesystem(),
                                               std::move(order), options_.prefetch_bytes);
    options_.file_cache->SetPriority(prefetcher_->NextUse());
    hooks_.io_stage = Stage::kRead;  // cache entries are local files
    hooks_.open = [this](int32_t file) {
      const int64_t pos = file_position_[static_cast<size_t>(file)];
      if (pos < 0)
        return arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>>(
            Error(ErrorKind::kStorage, "file not in the engine's plan"));
      return options_.file_cache->OpenFile(catalog_->filesystem(),
                                           remote_files_[static_cast<size_t>(pos)], &stop_);
    };
  }

  void StopWorkers() {
    stop_.store(true);
    if (prefetcher_) prefetcher_->Stop();
    store_.Stop();
    budget_->Stop();
    built_.Stop();
  }

  // Gives back one count of the workers decoding ahead when it goes out of
  // scope (null: nothing counted).
  class AheadCount {
   public:
    explicit AheadCount(std::atomic<int>* count) : count_(count) {}
    ~AheadCount() {
      if (count_) count_->fetch_sub(1);
    }
    AheadCount(const AheadCount&) = delete;
    AheadCount& operator=(const AheadCount&) = delete;

   private:
    std::atomic<int>* count_;
  };

  // Work for a worker that has none of its own: a part of a decode in
  // progress, else decodes one row group that the current or (with
  // `next_window`) the next window of unit `unit` will need and that nobody
  // has claimed; false if there is none.  Never reaches into a window that may
  // already be released (all of whose units have started).  A worker waiting
  // for a row group of its own unit helps too: while the consumer waits for
  // that unit, work on the next window comes forward rather than idling (the
  // pass's throughput), at the cost of the unit's latency -- but not when the
  // row group it waits for is about to be decoded (its shared parts all
  // taken): the second batch of a pass waited 36-64 ms for a decode of the
  // next window.
  //
  // `ahead`: the caller has no unit to build (the ready batches are full).
  // Then, where decodes offer parts, at most all workers but one decode whole row groups at once;
  // the others take parts of those decodes and are back between parts to build the units the
  // consumer's takes make room for.  When every worker was decoding a row group of the next window,
  // the consumer drained the ready batches meanwhile and waited at each window boundary (9% of a
  // step of 1.25 times the loader's per-batch time).
  bool HelpDecode(int64_t unit, bool next_window, bool ahead) {
    if (stop_.load()) return false;
    if (store_.RunOfferedPart()) return true;
    const int64_t w_cur = schedule_->WindowOf(schedule_->UnitSpan(unit).begin);
    const int64_t w_end = std::min(w_cur + (next_window ? 1 : 0), schedule_->num_windows() - 1);
    for (int64_t w = w_cur; w <= w_end; ++w) {
      // The stream ends at the first unit that needs a row group that failed;
      // a later window's units all come after it, and in its own window the
      // units decode what they need themselves (a stalled store made each
      // decode ahead wait out remote_timeout while the ready batches
      // trickled: the error came 28 timeouts late).
      if (w >= failed_window_.load()) break;
      const Interval units = schedule_->UnitRange(w);
      if (units.empty() || (w != w_cur && units.last <= max_started_.load())) continue;
      for (int32_t rg : schedule_->NeededRowGroups(w)) {
        if (!store_.Claimable(w, rg)) continue;
        // (Where no decode offers parts, nobody could help a decode ahead:
        // every worker may decode one.)
        const int max_ahead = store_.offers_parts() ? std::max(1, num_threads_ - 1) : num_threads_;
        if (ahead && decoding_ahead_.fetch_add(1) >= max_ahead) {
          decoding_ahead_.fetch_sub(1);
          return false;
        }
        const AheadCount counted(ahead ? &decoding_ahead_ : nullptr);
        // Work ahead only within the budget.
        const int64_t reserved = Reservation(rg);
        if (!budget_->TryReserve(MemoryBudget::kDecoding, reserved)) return false;
        auto slot = store_.Claim(w, units.size(), rg);
        if (!slot) {
          budget_->Release(MemoryBudget::kDecoding, reserved);
          continue;
        }
        store_.Fill(slot, Decode(w, rg, reserved, slot));
        return true;
      }
    }
    return false;
  }

  // Another process decodes a tier entry this thread needs (DataLoader
  // workers or ranks sharing cache_dir want the same row group at the same
  // time): rather than wait, decode a row group the consumer needs soon, so
  // that the processes leapfrog instead of taking turns.  Not from inside such
  // a decode (its slot and reservation are held meanwhile).
  bool HelpWhileLocked() {
    thread_local int depth = 0;
    const int64_t unit = consumer_unit_.load();
    if (depth > 0 || unit >= schedule_->num_units()) return false;
    ++depth;
    const bool helped = HelpDecode(unit, /*next_window=*/true, /*ahead=*/false);
    --depth;
    return helped;
  }

  Item BuildUnit(int64_t unit, std::vector<SampleRef>* samples) {
    // Until the consumer's first next() (an engine started early, while the
    // pass before is served, shares that pass's budget), nothing goes past
    // the limit: a batch is built only where its bytes fit, and no decode is
    // urgent.  This pass then takes only the room the other leaves.
    // (At most the limit: the estimate comes from untrusted footer sizes.)
    int64_t booked = 0;
    if (!consumer_started_.load() && budget_->limit() > 0) {
      const int64_t want = std::min(batch_bytes_, budget_->limit());
      if (!budget_->Reserve(
              MemoryBudget::kBatches, want, [&] { return consumer_started_.load(); },
              [&] { return stop_.load(); })) {
        return arrow::Status::Cancelled("the loader was closed");
      }
      booked = want;
    }
    int64_t seen = max_started_.load();
    while (unit > seen && !max_started_.compare_exchange_weak(seen, unit)) {
    }
    const int64_t b = schedule_->BatchOfUnit(unit);
    const auto [begin, end] = schedule_->UnitSpan(unit);
    schedule_->ResolveUnit(unit, samples);
    if (prefetcher_ && !samples->empty()) {
      const auto f = catalog_->row_groups()[static_cast<size_t>((*samples)[0].row_group)].file;
      const int64_t pos = file_position_[static_cast<size_t>(f)];
      int64_t furthest = furthest_file_.load();
      while (pos > furthest && !furthest_file_.compare_exchange_weak(furthest, pos)) {
      }
      if (pos >= furthest) prefetcher_->Advance(static_cast<size_t>(pos));
    }
    const Interval windows = schedule_->UnitWindows(unit);

    GatherInput in;
    in.slot.resize(samples->size());
    in.row.resize(samples->size());
    std::vector<std::shared_ptr<const DecodedRowGroup>> held;
    std::unordered_map<int32_t, int32_t> slot_of;
    arrow::Status status;
    for (size_t i = 0; i < samples->size() && status.ok(); ++i) {
      const auto& s = (*samples)[i];
      auto it = slot_of.find(s.row_group);
      if (it == slot_of.end()) {
        const int64_t w = schedule_->WindowOf(begin + static_cast<int64_t>(i));
        const int64_t reserved = Reservation(s.row_group);
        auto maybe = store_.Get(
            w, schedule_->UnitsOverlapping(w), s.row_group,
            [&] {
              // What the consumer's next unit needs is decoded whatever the
              // budget says: the budget never stops the stream.
              // A worker that made the slot meanwhile decodes it: this one
              // then waits for it, and takes parts of the decode.
              return budget_->Reserve(
                  MemoryBudget::kDecoding, reserved,
                  [&] { return consumer_started_.load() && unit <= consumer_unit_.load(); },
                  [&] { return store_.Decoding(w, s.row_group); });
            },
            [&] { budget_->Release(MemoryBudget::kDecoding, reserved); },
            [&](const std::shared_ptr<RowGroupStore::Slot>& slot) {
              return Decode(w, s.row_group, reserved, slot);
            },
            [&](bool soon) { return HelpDecode(unit, /*next_window=*/!soon, /*ahead=*/false); });
        if (!maybe.ok()) {
          status = maybe.status();
          break;
        }
        it = slot_of.emplace(s.row_group, static_cast<int32_t>(held.size())).first;
        held.push_back(*maybe);
        in.slots.push_back(held.back().get());
      }
      in.slot[i] = it->second;
      in.row[i] = s.row;
    }
    if (!status.ok()) {
      if (booked > 0) budget_->Release(MemoryBudget::kBatches, booked);
      return status;
    }
    const auto t0 = Clock::now();
    AssembleLimits limits;
    limits.memory_limit = options_.memory_limit;
    limits.row_group_name = [this](int32_t rg) { return RowGroupContext(rg); };
    auto batch = Assemble(layout_, in, b, arena_, limits);
    // A row group mapped from the decoded tier that lost pages meanwhile, or
    // was cut short in place, gave zeros: the batch is not delivered.  (The
    // changes queued by now cover every read above.)
    // A stat per mapped entry too, where they are few (a window of up to
    // kSizeChecksPerBatch row groups; a global shuffle over few): it sees a
    // truncation still in progress.
    const auto mapped = static_cast<size_t>(std::count_if(
        held.begin(), held.end(), [](const auto& h) { return h->mapped_damage != nullptr; }));
    if (batch.ok() && mapped > 0) SeeTierChanges(options_.decoded_tier.get());
    for (const auto& h : held) {
      if (!batch.ok()) break;
      auto intact = MappedIntact(*h, RowGroupContext(h->index), options_.decoded_tier.get(),
                                 mapped <= kSizeChecksPerBatch);
      if (!intact.ok()) batch = std::move(intact);
    }
    if (options_.debug_slow_stage == "assemble" && options_.debug_slow_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(options_.debug_slow_us));
    }
    clock_->Add(Stage::kAssemble, t0, 0, end - begin, b);
    for (int64_t w = windows.first; w <= windows.last; ++w) {
      store_.Release(w, schedule_->UnitsOverlapping(w));
    }
    if (batch.ok() && *batch) {
      if (booked > 0) {
        budget_->Convert(MemoryBudget::kBatches, booked, MemoryBudget::kBatches,
                         BatchBytes(**batch));
      } else {
        budget_->Add(MemoryBudget::kBatches, BatchBytes(**batch));
      }
    } else if (booked > 0) {
      budget_->Release(MemoryBudget::kBatches, booked);
    }
    return batch;
  }

  // "file '...', row group N": what errors about catalog row group `rg` name.
  std::string RowGroupContext(int32_t rg) const {
    const auto& entry = catalog_->row_groups()[static_cast<size_t>(rg)];
    return "file '" + catalog_->files()[static_cast<size_t>(entry.file)].rel_path +
           "', row group " + std::to_string(entry.row_group);
  }

  int64_t Reservation(int32_t rg) const {
    return DecodeReservation((*footprints_)[static_cast<size_t>(rg)],
                             catalog_->row_groups()[static_cast<size_t>(rg)].total_bytes);
  }

  // Decodes row group `rg` into its newly made `slot` of `window`, for which `reserved`
  // bytes are booked as kDecoding: they become the decoded row group's own
  // size, given back when the last holder drops it (or all of them when the
  // decode fails).
  arrow::Result<std::shared_ptr<const DecodedRowGroup>> Decode(
      int64_t window, int32_t rg, int64_t reserved,
      const std::shared_ptr<RowGroupStore::Slot>& slot) {
    // A worker waiting for memory to decode `rg` itself now waits for the slot
    // instead (RowGroupStore::Decoding ends its Reserve).
    budget_->Wake();
    if (window == last_window_) last_window_decodes_.fetch_add(1);
    // An exception must not leave the slot loading (its waiters would hang) nor
    // end the worker thread (std::terminate): it becomes this row group's error.
    const std::string context = RowGroupContext(rg);
    const PlanOptions& plan = schedule_->plan().options();
    // The workers that wait for this row group may take parts of its decode.
    DecodeHooks hooks = hooks_;
    hooks.share = [this, window, &slot](std::shared_ptr<SharedWork> work) {
      store_.Offer(window, slot, std::move(work));
    };
    auto result = Guarded(context, [&] {
      return DecodeRowGroup(*catalog_, rg, layout_, RandomKey{plan.seed, plan.epoch}, hooks);
    });
    if (window == last_window_ && last_window_done_.fetch_add(1) + 1 == last_window_needed_) {
      // This engine decodes no more: the matrices it frees from now on are
      // the next pass's, whose engine may be decoding beside it already.
      hooks_.matrices->Retire();
    }
    if (!result.ok()) {
      budget_->Release(MemoryBudget::kDecoding, reserved);
      if (!result.status().IsCancelled()) {
        int64_t failed = failed_window_.load();
        while (window < failed && !failed_window_.compare_exchange_weak(failed, window)) {
        }
      }
      return result;
    }
    const int64_t resident = ResidentBytes(**result);
    budget_->Convert(MemoryBudget::kDecoding, reserved, MemoryBudget::kDecoded, resident);
    row_groups_decoded_ += 1;
    rows_decoded_ += (*result)->num_rows;
    bytes_decoded_ += (*result)->bytes;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      decoded_list_.push_back(rg);
    }
    // Count decoded row groups alive; the deleter holds the counter, not the engine.
    auto live = live_;
    const int64_t now = ++live->count;
    int64_t peak = live->peak.load();
    while (now > peak && !live->peak.compare_exchange_weak(peak, now)) {
    }
    std::shared_ptr<const DecodedRowGroup> data = *result;
    auto budget = budget_;
    return std::shared_ptr<const DecodedRowGroup>(
        data.get(), [data, live, budget, resident](const DecodedRowGroup*) mutable {
          // The booking goes first: the matrix pool keeps the freed matrix
          // only if the budget has room for it, and with the row group still
          // booked it counted twice (the last window's second matrix was
          // freed at the end of an epoch, and the next epoch faulted in a
          // fresh one).
          budget->Release(MemoryBudget::kDecoded, resident);
          data.reset();
          --live->count;
        });
  }

  // Claims units in order from the shared buffer, builds them and hands them
  // in; when the consumer is `capacity` units behind, decodes the windows
  // ahead instead of idling.  Any worker builds any unit, so while one decodes
  // a row group the others keep delivering the units in between.
  void Work(int w) {
    StageClock::SetWorker(w);
    UseBatchScheduling();
    std::mt19937_64 jitter(static_cast<uint64_t>(Clock::now().time_since_epoch().count()) +
                           static_cast<uint64_t>(w));
    std::vector<SampleRef> samples;
    while (!stop_.load()) {
      const auto t0 = Clock::now();
      int64_t waited_ns = 0;
      const int64_t unit = built_.Claim(
          [&](int64_t next) { return HelpDecode(next, /*next_window=*/true, /*ahead=*/true); },
          &waited_ns);
      if (waited_ns > 0) clock_->AddSpan(Stage::kWaitFull, t0, Clock::now(), waited_ns, 0, 0, unit);
      if (unit < 0) {
        // Every batch is claimed: the blocks of those the consumer has yet to
        // take are kept for the next epoch while there is room.
        if (recycler_) recycler_->KeepWhileRoom();
        return;
      }
      if (options_.debug_max_delay_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(
            jitter() % static_cast<uint64_t>(options_.debug_max_delay_us + 1)));
      }
      Item item = Guarded("batch " + std::to_string(schedule_->BatchOfUnit(unit)),
                          [&] { return BuildUnit(unit, &samples); });
      const bool failed = !item.ok();
      built_.Put(unit, std::move(item));
      if (failed) return;  // the consumer stops at this unit
    }
  }

  std::shared_ptr<const Catalog> catalog_;
  std::shared_ptr<const Schedule> schedule_;
  const EngineOptions options_;
  const Layout layout_;
  const Clock::time_point started_ = Clock::now();
  std::shared_ptr<StageClock> clock_;
  DecodeHooks hooks_;

  const int num_threads_;
  // Per catalog row group (shared by the engines of one catalog and columns).
  const std::shared_ptr<const std::vector<RowGroupFootprint>> footprints_;
  // Shared with the decoded row groups' deleters, which may outlive the engine.
  std::shared_ptr<MemoryBudget> budget_;
  std::shared_ptr<BatchRecycler> recycler_;  // null with options_.output_arena
  std::shared_ptr<OutputArena> arena_;       // where batch buffers come from
  const int64_t batch_bytes_;                // a batch's bytes, estimated from the footers
  const int64_t capacity_;                   // built batches kept at most
  RowGroupStore store_;
  ReorderBuffer<Item> built_;  // built units, until the consumer takes them in order
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex join_mu_;
  bool left_ = false;  // (under join_mu_) idle memory handed to options_.leftovers

  std::mutex consumer_mu_;
  int64_t next_unit_ = 0;
  arrow::Status error_;

  std::atomic<int64_t> row_groups_decoded_{0}, rows_decoded_{0}, bytes_decoded_{0};
  std::atomic<int64_t> batches_{0}, rows_delivered_{0};

  mutable std::mutex stats_mu_;
  std::vector<int32_t> decoded_list_;
  struct LiveCount {
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> peak{0};
  };
  std::shared_ptr<LiveCount> live_ = std::make_shared<LiveCount>();
  std::atomic<int64_t> consumer_unit_{0};      // next_unit_, for workers to read
  std::atomic<bool> consumer_started_{false};  // next() has been called
  // Decodes begun in the last window the units read, of the row groups they need.
  std::atomic<int64_t> last_window_decodes_{0};
  std::atomic<int64_t> last_window_done_{0};  // ... and ended
  int64_t last_window_ = -1;
  int64_t last_window_needed_ = 0;
  std::atomic<int64_t> max_started_{-1};  // the highest unit any worker has begun
  // The first window with a row group whose decode failed: none past it is
  // decoded ahead.
  std::atomic<int64_t> failed_window_{std::numeric_limits<int64_t>::max()};
  std::atomic<int> decoding_ahead_{0};  // workers decoding a row group with no unit to build
  std::vector<int64_t> file_position_;  // catalog file -> position in remote_files_
  std::vector<RemoteFileInfo> remote_files_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::atomic<int64_t> furthest_file_{-1};
};

}  // namespace

arrow::Result<std::unique_ptr<Engine>> Engine::Make(std::shared_ptr<const Catalog> catalog,
                                                    std::shared_ptr<const EpochPlan> plan,
                                                    const EngineOptions& options) {
  if (!catalog || !plan) return Error(ErrorKind::kInvalidArgument, "catalog and plan are required");
  ARROW_RETURN_NOT_OK(options.Validate());
  ARROW_ASSIGN_OR_RAISE(auto schedule, Schedule::Make(std::move(plan), options.start_batch,
                                                      options.batch_offset, options.batch_stride));
  ARROW_ASSIGN_OR_RAISE(Layout layout, MakeLayout(*catalog->schema(), options.output));
  return std::unique_ptr<Engine>(
      new EngineImpl(std::move(catalog), std::move(schedule), options, std::move(layout)));
}

int64_t LiveEngineThreads() { return LiveThreadGuard::count(); }

bool WaitForAbandonedRemoteCalls(double seconds) { return WaitForDetachedCalls(seconds); }

}  // namespace shardfeed
