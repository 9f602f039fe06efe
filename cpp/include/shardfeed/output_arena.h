// An OutputArena over slabs of memory that someone else owns: the page-locked
// batch buffers of pin_memory=True.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "shardfeed/batch.h"

namespace shardfeed {

struct SlabArenaStats {
  int64_t slabs = 0;
  int64_t bytes = 0;        // in all slabs
  int64_t used_bytes = 0;   // in blocks handed out now
  int64_t peak_bytes = 0;   // the most used_bytes has been
  int64_t allocations = 0;  // blocks handed out
  int64_t misses = 0;       // requests no slab had room for
  int64_t missed_bytes = 0;
};

// First fit over each slab's free blocks (64-byte granules), merging freed
// neighbours.  A slab's `owner` keeps its memory alive until the arena and
// every block handed out from it are gone.
class SlabArena : public OutputArena {
 public:
  ~SlabArena() override;
  // Adds [data, data + size); the part before the first 64-byte boundary is
  // not used.
  void AddSlab(uint8_t* data, size_t size, std::shared_ptr<void> owner);
  uint8_t* Allocate(size_t size) override;
  void Free(uint8_t* data, size_t size) override;
  SlabArenaStats stats() const;
  // True when `data` lies inside one of the slabs.
  bool Contains(const uint8_t* data) const;

 private:
  struct Slab {
    uint8_t* base = nullptr;
    size_t size = 0;
    std::map<size_t, size_t> free;  // offset -> length, disjoint, not adjacent
    std::shared_ptr<void> owner;
  };
  mutable std::mutex mu_;
  std::vector<Slab> slabs_;
  SlabArenaStats stats_;
};

}  // namespace shardfeed
