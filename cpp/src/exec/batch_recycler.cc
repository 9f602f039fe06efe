#include "exec/batch_recycler.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "util/memory.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDFEED_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SHARDFEED_ASAN 1
#endif
#ifdef SHARDFEED_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace shardfeed {
namespace {

constexpr size_t kMinClass = 4096;
constexpr int64_t kAlignment = 64;

// An idle block is out of bounds for AddressSanitizer: a batch array used
// after its buffer came back here is reported as it would be after a free.
void Poison(uint8_t* data, size_t size) {
#ifdef SHARDFEED_ASAN
  ASAN_POISON_MEMORY_REGION(data, size);
#else
  (void)data;
  (void)size;
#endif
}

void Unpoison(uint8_t* data, size_t size) {
#ifdef SHARDFEED_ASAN
  ASAN_UNPOISON_MEMORY_REGION(data, size);
#else
  (void)data;
  (void)size;
#endif
}

void FreeAll(const std::vector<std::pair<size_t, uint8_t*>>& blocks) {
  for (const auto& [size, data] : blocks) {
    Unpoison(data, size);
    EnginePool()->Free(data, static_cast<int64_t>(size), kAlignment);
  }
}

}  // namespace

BatchRecycler::BatchRecycler(std::shared_ptr<MemoryBudget> budget, int64_t max_idle_bytes)
    : budget_(std::move(budget)), max_idle_bytes_(max_idle_bytes) {}

BatchRecycler::~BatchRecycler() {
  FreeAll(to_free_);
  FreeAll(idle_);
  if (counts_.idle_bytes > 0) budget_->Release(MemoryBudget::kIdle, counts_.idle_bytes);
}

size_t BatchRecycler::SizeClass(size_t size) {
  if (size <= kMinClass) return kMinClass;
  const size_t step = std::max(kMinClass, std::bit_floor(size) / 8);
  return (size + step - 1) / step * step;
}

uint8_t* BatchRecycler::Allocate(size_t size) {
  const size_t cls = SizeClass(size);
  std::vector<Block> to_free;
  uint8_t* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    to_free.swap(to_free_);
    // The newest idle block of this class: the most likely still in cache.
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      if (it->first == cls) {
        data = it->second;
        idle_.erase(std::next(it).base());
        counts_.idle_bytes -= static_cast<int64_t>(cls);
        ++counts_.reused;
        budget_->Release(MemoryBudget::kIdle, static_cast<int64_t>(cls));
        break;
      }
    }
    if (data == nullptr) {
      ++counts_.allocated;
      // Blocks kept past the cap (Free) are not of the size in use now, nor
      // is anything idle while the budget is over its limit: freed first.
      int64_t excess = std::max(counts_.idle_bytes - max_idle_bytes_, budget_->Excess());
      while (excess > 0 && !idle_.empty()) {
        const Block oldest = idle_.front();
        idle_.erase(idle_.begin());
        counts_.idle_bytes -= static_cast<int64_t>(oldest.first);
        budget_->Release(MemoryBudget::kIdle, static_cast<int64_t>(oldest.first));
        to_free.push_back(oldest);
        excess -= static_cast<int64_t>(oldest.first);
      }
    }
  }
  FreeAll(to_free);
  if (data != nullptr) {
    Unpoison(data, cls);
    return data;
  }
  if (!EnginePool()->Allocate(static_cast<int64_t>(cls), kAlignment, &data).ok()) return nullptr;
  AdviseHugePages(data, static_cast<int64_t>(cls));
  return data;
}

void BatchRecycler::Free(uint8_t* data, size_t size) {
  const size_t cls = SizeClass(size);
  Poison(data, cls);
  const auto bytes = static_cast<int64_t>(cls);
  // Past the cap, at the end of an epoch (KeepWhileRoom), a block is kept
  // while the budget has room for it: the ready batches' blocks are kept for
  // the next epoch's engine (EngineLeftovers), whose first batches would
  // otherwise fault in fresh pages.  Not before: blocks kept mid-epoch took
  // the room that the last windows' matrices needed.
  const bool room = keep_while_room_.load() && budget_->limit() > 0 && budget_->Room() >= bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.empty() || counts_.idle_bytes + bytes <= max_idle_bytes_ || room) {
    idle_.emplace_back(cls, data);
    counts_.idle_bytes += bytes;
    budget_->Add(MemoryBudget::kIdle, bytes);
  } else {
    to_free_.emplace_back(cls, data);
  }
}

int64_t BatchRecycler::Prefault(const std::vector<size_t>& sizes, int64_t batches, int threads) {
  // Sizes come from the footers' row counts: compared with the cap before any
  // sum, so that none can overflow.
  int64_t per_batch = 0;
  for (size_t size : sizes) {
    if (size > static_cast<size_t>(std::max<int64_t>(max_idle_bytes_, 0))) return 0;
    const auto cls = static_cast<int64_t>(SizeClass(size));
    if (cls > max_idle_bytes_ - per_batch) return 0;  // not even one batch fits the cap
    per_batch += cls;
  }
  std::vector<Block> made;
  int64_t total = 0;
  bool failed = false;
  for (int64_t b = 0; b < batches && !failed && per_batch > 0; ++b) {
    if (per_batch > max_idle_bytes_ - total) break;
    for (size_t size : sizes) {
      const size_t cls = SizeClass(size);
      uint8_t* data = nullptr;
      if (!EnginePool()->Allocate(static_cast<int64_t>(cls), kAlignment, &data).ok()) {
        failed = true;  // none made is not an error: the batches allocate their own
        break;
      }
      AdviseHugePages(data, static_cast<int64_t>(cls));
      made.emplace_back(cls, data);
      total += static_cast<int64_t>(cls);
    }
  }
  std::vector<std::pair<uint8_t*, int64_t>> ranges;
  for (const auto& [cls, data] : made) ranges.emplace_back(data, static_cast<int64_t>(cls));
  WritePages(ranges, threads);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [cls, data] : made) {
    Poison(data, cls);
    idle_.emplace_back(cls, data);
    counts_.idle_bytes += static_cast<int64_t>(cls);
    ++counts_.prefaulted;
  }
  if (total > 0) budget_->Add(MemoryBudget::kIdle, total);
  return total;
}

void BatchRecycler::Adopt(std::vector<Block>* from) {
  for (const auto& [cls, data] : *from) Free(data, cls);
  from->clear();
}

void BatchRecycler::Surrender(std::vector<Block>* to) {
  std::vector<Block> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    budget_->Release(MemoryBudget::kIdle, counts_.idle_bytes);
    counts_.idle_bytes = 0;
    to->insert(to->end(), idle_.begin(), idle_.end());
    idle_.clear();
    to_free.swap(to_free_);
  }
  FreeAll(to_free);
}

void BatchRecycler::FreeBlocks(std::vector<Block>* blocks) {
  FreeAll(*blocks);
  blocks->clear();
}

BatchRecycler::Counts BatchRecycler::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace shardfeed
