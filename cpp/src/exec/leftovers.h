// What an EngineLeftovers holds between engines (internal).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include <arrow/buffer.h>

#include "exec/batch_recycler.h"
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
  std::vector<BatchRecycler::Block> batch_blocks;       // from EnginePool()
};

}  // namespace shardfeed
