#include "shardfeed/output_arena.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

namespace shardfeed {

namespace {
constexpr size_t kGranule = 64;
size_t RoundUp(size_t n) { return (n + kGranule - 1) / kGranule * kGranule; }
}  // namespace

SlabArena::~SlabArena() = default;

void SlabArena::AddSlab(uint8_t* data, size_t size, std::shared_ptr<void> owner) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  const size_t skip = RoundUp(address) - address;
  if (size <= skip + kGranule) return;
  Slab slab;
  slab.base = data + skip;
  slab.size = (size - skip) / kGranule * kGranule;
  slab.free.emplace(0, slab.size);
  slab.owner = std::move(owner);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.slabs += 1;
  stats_.bytes += static_cast<int64_t>(slab.size);
  slabs_.push_back(std::move(slab));
}

uint8_t* SlabArena::Allocate(size_t size) {
  const size_t need = RoundUp(std::max<size_t>(size, 1));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& slab : slabs_) {
    for (auto it = slab.free.begin(); it != slab.free.end(); ++it) {
      if (it->second < need) continue;
      const size_t offset = it->first;
      const size_t rest = it->second - need;
      slab.free.erase(it);
      if (rest > 0) slab.free.emplace(offset + need, rest);
      stats_.allocations += 1;
      stats_.used_bytes += static_cast<int64_t>(need);
      stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.used_bytes);
      return slab.base + offset;
    }
  }
  stats_.misses += 1;
  stats_.missed_bytes += static_cast<int64_t>(need);
  return nullptr;
}

void SlabArena::Free(uint8_t* data, size_t size) {
  const size_t need = RoundUp(std::max<size_t>(size, 1));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& slab : slabs_) {
    if (data < slab.base || data >= slab.base + slab.size) continue;
    size_t offset = static_cast<size_t>(data - slab.base);
    size_t length = need;
    auto next = slab.free.lower_bound(offset);
    if (next != slab.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        length += prev->second;
        slab.free.erase(prev);
      }
    }
    if (next != slab.free.end() && offset + length == next->first) {
      length += next->second;
      slab.free.erase(next);
    }
    slab.free.emplace(offset, length);
    stats_.used_bytes -= static_cast<int64_t>(need);
    return;
  }
}

SlabArenaStats SlabArena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool SlabArena::Contains(const uint8_t* data) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(slabs_.begin(), slabs_.end(),
                     [&](const Slab& s) { return data >= s.base && data < s.base + s.size; });
}

}  // namespace shardfeed
