#include "exec/matrix_pool.h"

#include <algorithm>
#include <utility>

#include "util/memory.h"

namespace shardfeed {

// A taken matrix: the backing buffer's memory, which goes back to the pool
// with its last holder.
class PooledBuffer : public arrow::MutableBuffer {
 public:
  PooledBuffer(std::unique_ptr<arrow::Buffer> backing, int64_t size, std::weak_ptr<MatrixPool> pool)
      : arrow::MutableBuffer(backing->mutable_data(), size),
        backing_(std::move(backing)),
        pool_(std::move(pool)) {
    capacity_ = backing_->capacity();
  }
  ~PooledBuffer() override {
    if (auto pool = pool_.lock()) pool->GiveBack(std::move(backing_));
  }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

 private:
  std::unique_ptr<arrow::Buffer> backing_;
  std::weak_ptr<MatrixPool> pool_;
};

namespace {
// The newest matrix of `from` that fits `bytes` (the most likely still in
// cache), taken out; null if none.
std::unique_ptr<arrow::Buffer> TakeNewestFit(std::deque<std::unique_ptr<arrow::Buffer>>* from,
                                             int64_t bytes) {
  for (auto it = from->rbegin(); it != from->rend(); ++it) {
    if (MatrixFits((*it)->capacity(), bytes)) {
      auto matrix = std::move(*it);
      from->erase(std::next(it).base());
      return matrix;
    }
  }
  return nullptr;
}
}  // namespace

void MatrixShelf::Put(std::unique_ptr<arrow::Buffer> matrix) {
  const int64_t cap = matrix->capacity();
  std::lock_guard<std::mutex> lock(mu_);
  matrices_.push_back(std::move(matrix));
  bytes_ += cap;
  if (group_) group_->idle.fetch_add(cap);
}

std::unique_ptr<arrow::Buffer> MatrixShelf::TakeFit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto matrix = TakeNewestFit(&matrices_, bytes);
  if (matrix) {
    bytes_ -= matrix->capacity();
    if (group_) group_->idle.fetch_sub(matrix->capacity());
  }
  return matrix;
}

std::deque<std::unique_ptr<arrow::Buffer>> MatrixShelf::TakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (group_) group_->idle.fetch_sub(bytes_);
  bytes_ = 0;
  return std::exchange(matrices_, {});
}

void MatrixShelf::Clear() { TakeAll(); }

int64_t MatrixShelf::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

MatrixPool::MatrixPool(std::shared_ptr<MemoryBudget> budget, int max_idle, int64_t max_idle_bytes)
    : budget_(std::move(budget)), max_idle_(max_idle), max_idle_bytes_(max_idle_bytes) {}

MatrixPool::~MatrixPool() {
  std::lock_guard<std::mutex> lock(mu_);
  FreeLocked(counts_.idle_bytes);
}

arrow::Result<std::shared_ptr<arrow::Buffer>> MatrixPool::Take(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 1);
  std::unique_ptr<arrow::Buffer> backing;
  std::shared_ptr<MatrixShelf> shelf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    backing = TakeNewestFit(&idle_, bytes);
    if (backing) {
      counts_.idle_bytes -= backing->capacity();
      budget_->Release(MemoryBudget::kIdle, backing->capacity());
    }
    shelf = shelf_;
  }
  // Else one another engine of the stream left (the shelf's lock is never
  // taken under this pool's).
  if (!backing && shelf) backing = shelf->TakeFit(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (backing) {
      ++counts_.reused;
    } else {
      // The reservation that led here may have counted on idle bytes.
      FreeLocked(budget_->Excess());
      ++counts_.allocated;
    }
  }
  if (!backing) {
    ARROW_ASSIGN_OR_RAISE(backing, arrow::AllocateBuffer(bytes, EnginePool()));
    AdviseHugePages(backing->mutable_data(), backing->capacity());
  }
  return std::make_shared<PooledBuffer>(std::move(backing), bytes, weak_from_this());
}

int64_t MatrixPool::Prefault(const std::vector<int64_t>& sizes, int64_t max_bytes, int threads) {
  std::vector<std::shared_ptr<arrow::Buffer>> made;
  int64_t total = 0;
  for (int64_t bytes : sizes) {
    if (static_cast<int>(made.size()) >= max_idle_ || bytes > max_bytes - total) break;
    const int64_t allocated = counts().allocated;
    auto matrix = Take(bytes);
    if (!matrix.ok()) break;
    if (counts().allocated > allocated) {
      std::lock_guard<std::mutex> lock(mu_);
      --counts_.allocated;
      ++counts_.prefaulted;
    }
    total += bytes;
    made.push_back(*std::move(matrix));
  }
  // Written by `threads` threads: the faults cost the same spread over the
  // cores as the decodes would have spread them.
  std::vector<std::pair<uint8_t*, int64_t>> ranges;
  for (const auto& m : made) ranges.emplace_back(m->mutable_data(), m->size());
  WritePages(ranges, threads);
  return total;  // `made` goes back to the pool here
}

void MatrixPool::GiveBack(std::unique_ptr<arrow::Buffer> backing) {
  const int64_t cap = backing->capacity();
  std::shared_ptr<MatrixShelf> shelf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (max_idle_ <= 0) return;  // freed
    if (!retired_) {
      KeepLocked(std::move(backing), cap);
      return;
    }
    shelf = shelf_;
  }
  shelf->Put(std::move(backing));
}

void MatrixPool::KeepLocked(std::unique_ptr<arrow::Buffer> backing, int64_t cap) {
  // One matrix is kept whatever its size: a row group larger than the cap is
  // the case where fresh pages cost most (the next decode's matrix beside the
  // freed one that the allocator has not purged yet: bench_memory's 262k-row
  // groups peaked at either 0.36 or 0.64 GB above imports at 256 MiB).  Past
  // the byte cap, matrices are kept while the budget has room for them
  // (booked and idle bytes within the limit, the ready batches left out: the
  // consumer takes them soon): at the end of an epoch all of the last
  // windows' matrices are kept for the next epoch's engine (EngineLeftovers).
  // With the ready batches counted, one of bench_core's four was freed at
  // the end of every epoch, and the next epoch decoded its second window into
  // a fresh matrix.
  const bool room = budget_->limit() > 0 && budget_->Room(/*with_batches=*/false) >= cap;
  while (!idle_.empty() &&
         (static_cast<int>(idle_.size()) >= max_idle_ ||
          (max_idle_bytes_ > 0 && counts_.idle_bytes + cap > max_idle_bytes_ && !room))) {
    FreeLocked(1);
  }
  counts_.idle_bytes += cap;
  idle_.push_back(std::move(backing));
  budget_->Add(MemoryBudget::kIdle, cap);
}

void MatrixPool::UseShelf(std::shared_ptr<MatrixShelf> shelf) {
  std::lock_guard<std::mutex> lock(mu_);
  shelf_ = std::move(shelf);
}

void MatrixPool::Adopt() {
  std::shared_ptr<MatrixShelf> shelf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shelf = shelf_;
  }
  if (!shelf) return;
  auto from = shelf->TakeAll();
  std::lock_guard<std::mutex> lock(mu_);
  if (max_idle_ <= 0) return;  // freed
  for (auto& m : from) {
    const int64_t cap = m->capacity();
    KeepLocked(std::move(m), cap);
  }
}

std::deque<std::unique_ptr<arrow::Buffer>> MatrixPool::TakeIdleLocked() {
  budget_->Release(MemoryBudget::kIdle, counts_.idle_bytes);
  counts_.idle_bytes = 0;
  return std::exchange(idle_, {});
}

void MatrixPool::Surrender() {
  std::deque<std::unique_ptr<arrow::Buffer>> idle;
  std::shared_ptr<MatrixShelf> shelf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shelf_) return;
    idle = TakeIdleLocked();
    shelf = shelf_;
  }
  for (auto& m : idle) shelf->Put(std::move(m));
}

void MatrixPool::Retire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shelf_) return;
    retired_ = true;
  }
  Surrender();
}

void MatrixPool::FreeLocked(int64_t bytes) {
  int64_t freed = 0;
  while (freed < bytes && !idle_.empty()) {
    const int64_t cap = idle_.front()->capacity();
    idle_.pop_front();
    counts_.idle_bytes -= cap;
    freed += cap;
    budget_->Release(MemoryBudget::kIdle, cap);
  }
}

MatrixPool::Counts MatrixPool::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace shardfeed
