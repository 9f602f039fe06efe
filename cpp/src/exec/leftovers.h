// What an EngineLeftovers holds between engines (internal).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include <arrow/buffer.h>

#include "exec/batch_recycler.h"
#include "exec/matrix_pool.h"
#include "exec/memory_budget.h"
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

  // The budgets of the engines given this object share their limit (the
  // next pass's engine, started early, decodes only into the room left).
  const std::shared_ptr<BudgetGroup> group = std::make_shared<BudgetGroup>();
  // Idle stack matrices (their own lock), counted in the group's idle bytes.
  const std::shared_ptr<MatrixShelf> matrices = std::make_shared<MatrixShelf>(group);

  mutable std::mutex mu;
  std::vector<BatchRecycler::Block> batch_blocks;  // from EnginePool()
};

}  // namespace shardfeed
