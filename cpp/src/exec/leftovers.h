// What an EngineLeftovers holds between engines (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <arrow/buffer.h>

#include "shardfeed/engine.h"

namespace shardfeed {

struct EngineLeftovers::Impl {
  Impl() = default;
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Frees everything (under mu).
  void ClearLocked();
  int64_t BytesLocked() const;

  mutable std::mutex mu;
  std::deque<std::unique_ptr<arrow::Buffer>> matrices;  // oldest first
  // Batch buffers: (size class, data), from EnginePool() (BatchRecycler's blocks).
  std::vector<std::pair<size_t, uint8_t*>> batch_blocks;
};

}  // namespace shardfeed
