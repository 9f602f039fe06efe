#include "exec/leftovers.h"

namespace shardfeed {

EngineLeftovers::EngineLeftovers() : impl_(std::make_unique<Impl>()) {}

EngineLeftovers::~EngineLeftovers() = default;

int64_t EngineLeftovers::bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->BytesLocked();
}

void EngineLeftovers::Clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ClearLocked();
}

EngineLeftovers::Impl::~Impl() { ClearLocked(); }

void EngineLeftovers::Impl::ClearLocked() {
  matrices->Clear();
  BatchRecycler::FreeBlocks(&batch_blocks);
}

int64_t EngineLeftovers::Impl::BytesLocked() const {
  int64_t bytes = matrices->bytes();
  for (const auto& [size, data] : batch_blocks) bytes += static_cast<int64_t>(size);
  return bytes;
}

}  // namespace shardfeed
