#include "plan/schedule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "shardfeed/status.h"

namespace shardfeed {

namespace {
// Windows whose NeededRowGroups are kept: the workers' in-flight units span a
// few consecutive windows at a time.
constexpr size_t kCachedWindows = 8;
}  // namespace

arrow::Result<std::shared_ptr<const Schedule>> Schedule::Make(std::shared_ptr<const EpochPlan> plan,
                                                              int64_t start_batch,
                                                              int64_t batch_offset,
                                                              int64_t batch_stride) {
  if (!plan) return Error(ErrorKind::kInvalidArgument, "a schedule needs a plan");
  if (batch_stride < 1 || batch_offset < 0 || batch_offset >= batch_stride) {
    return Error(
        ErrorKind::kInvalidArgument,
        "batch_offset must be in [0, batch_stride): batch_offset=" + std::to_string(batch_offset) +
            ", batch_stride=" + std::to_string(batch_stride));
  }
  if (start_batch < 0 || start_batch > plan->num_batches()) {
    return Error(ErrorKind::kInvalidArgument, "start_batch " + std::to_string(start_batch) +
                                                  " is outside [0, " +
                                                  std::to_string(plan->num_batches()) + "]");
  }
  return std::shared_ptr<const Schedule>(
      new Schedule(std::move(plan), start_batch + batch_offset, batch_stride));
}

Schedule::Schedule(std::shared_ptr<const EpochPlan> plan, int64_t first_batch, int64_t stride)
    : plan_(std::move(plan)), first_batch_(first_batch), stride_(stride) {
  const int64_t nb = plan_->num_batches();
  num_units_ = first_batch_ < nb ? (nb - first_batch_ + stride_ - 1) / stride_ : 0;
}

Span Schedule::UnitSpan(int64_t k) const {
  const int64_t b = BatchOfUnit(k);
  const int64_t begin = plan_->rank_begin() + plan_->BatchBegin(b);
  return {begin, begin + plan_->BatchSize(b)};
}

void Schedule::ResolveUnit(int64_t k, std::vector<SampleRef>* out) const {
  const Span span = UnitSpan(k);
  plan_->Resolve(span.begin, span.end, out);
}

Interval Schedule::UnitWindows(int64_t k) const {
  const Span span = UnitSpan(k);
  return {plan_->WindowOf(span.begin), plan_->WindowOf(span.end - 1)};
}

Interval Schedule::UnitRange(int64_t w) const {
  // The part of window w inside this rank's slice, then the rank's batches
  // that hold its first and last position, then the units among them.
  const int64_t rb = plan_->rank_begin(), re = rb + plan_->rank_size();
  const int64_t gb = std::max(plan_->WindowBegin(w), rb);
  const int64_t ge = std::min(plan_->WindowEnd(w), re);
  if (gb >= ge) return {};
  const int64_t b_lo = std::max(plan_->BatchOf(gb - rb), first_batch_);
  const int64_t b_hi = plan_->BatchOf(ge - 1 - rb);
  if (b_hi < b_lo) return {};
  const int64_t k_lo = (b_lo - first_batch_ + stride_ - 1) / stride_;
  const int64_t k_hi = std::min((b_hi - first_batch_) / stride_, num_units_ - 1);
  return {k_lo, k_hi};
}

std::vector<int32_t> Schedule::NeededRowGroups(int64_t w) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = needed_.find(w);
    if (it != needed_.end()) return it->second;
  }
  std::vector<int32_t> rgs = ComputeNeeded(w);
  std::lock_guard<std::mutex> lock(mu_);
  // Units are taken in increasing order: the lowest window is the oldest.
  if (needed_.size() >= kCachedWindows) needed_.erase(needed_.begin());
  needed_.emplace(w, rgs);
  return rgs;
}

std::vector<int32_t> Schedule::ComputeNeeded(int64_t w) const {
  const Interval units = UnitRange(w);
  std::vector<int32_t> rgs;
  const int64_t wb = plan_->WindowBegin(w), we = plan_->WindowEnd(w);
  bool whole = !units.empty();  // do the units cover the window without gaps?
  int64_t covered = wb;
  for (int64_t k = units.first; k <= units.last && whole; ++k) {
    const Span span = UnitSpan(k);
    whole = span.begin <= covered;
    covered = std::max(covered, span.end);
  }
  whole = whole && covered >= we;
  const auto& order = plan_->order();
  if (whole) {
    // Every row of the window is read: every row group of it is needed, and
    // none needs resolving.
    for (int64_t i = plan_->WindowFirst(w); i < plan_->WindowFirst(w + 1); ++i) {
      const int32_t rg = order[static_cast<size_t>(i)];
      if (plan_->RowGroupRows(rg) > 0) rgs.push_back(rg);  // a pruned one is never read
    }
    return rgs;
  }
  std::vector<SampleRef> samples;
  std::vector<bool> seen(order.size(), false);
  for (int64_t k = units.first; k <= units.last; ++k) {
    const Span span = UnitSpan(k);
    plan_->Resolve(std::max(span.begin, wb), std::min(span.end, we), &samples);
    for (const auto& sample : samples) {
      if (!seen[static_cast<size_t>(sample.row_group)]) {
        seen[static_cast<size_t>(sample.row_group)] = true;
        rgs.push_back(sample.row_group);
      }
    }
  }
  return rgs;
}

std::vector<int32_t> Schedule::FileFirstUseOrder(std::span<const int32_t> file_of_row_group) const {
  int32_t num_files = 0;
  for (int32_t f : file_of_row_group) num_files = std::max(num_files, f + 1);
  std::vector<bool> listed(static_cast<size_t>(num_files), false);
  std::vector<int32_t> files;
  // Windows in order, each window's row groups in their order of first use.
  // Computed afresh rather than through the memo, which belongs to the
  // workers' current windows.
  for (int64_t w = 0; w < plan_->num_windows(); ++w) {
    for (int32_t rg : ComputeNeeded(w)) {
      const int32_t f = file_of_row_group[static_cast<size_t>(rg)];
      if (listed[static_cast<size_t>(f)]) continue;
      listed[static_cast<size_t>(f)] = true;
      files.push_back(f);
    }
  }
  return files;
}

}  // namespace shardfeed
