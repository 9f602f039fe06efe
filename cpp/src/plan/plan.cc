#include "shardfeed/plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "shardfeed/rng.h"
#include "shardfeed/status.h"

namespace shardfeed {

namespace {
constexpr size_t kCachedPermutations = 8;

// a >= 0, b >= 1; without a + b, which overflows for a batch size near 2^63.
int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }
}  // namespace

arrow::Status PlanOptions::Validate() const {
  if (batch_size < 1) {
    return Error(ErrorKind::kInvalidArgument,
                 "batch_size must be at least 1, got " + std::to_string(batch_size));
  }
  if (world_size < 1) {
    return Error(ErrorKind::kInvalidArgument,
                 "world_size must be at least 1, got " + std::to_string(world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return Error(ErrorKind::kInvalidArgument,
                 "rank must be in [0, world_size): rank=" + std::to_string(rank) +
                     ", world_size=" + std::to_string(world_size));
  }
  if (window_row_groups < 1) {
    return Error(ErrorKind::kInvalidArgument, "shuffle_window must be at least 1 row group, got " +
                                                  std::to_string(window_row_groups));
  }
  if (global_shuffle && !shuffle) {
    return Error(ErrorKind::kInvalidArgument,
                 "shuffle='global' is a shuffle: it cannot go with shuffle off");
  }
  return arrow::Status::OK();
}

int64_t EpochPlan::WindowSize() const {
  if (!options_.shuffle) return 1;
  if (options_.global_shuffle) return std::max<int64_t>(1, static_cast<int64_t>(order_.size()));
  return options_.window_row_groups;
}

arrow::Result<std::shared_ptr<const EpochPlan>> EpochPlan::Make(std::vector<int64_t> rg_rows,
                                                                const PlanOptions& o) {
  ARROW_RETURN_NOT_OK(o.Validate());
  std::shared_ptr<EpochPlan> plan(new EpochPlan());
  plan->options_ = o;
  plan->rg_rows_ = std::move(rg_rows);
  const auto n_rg = static_cast<int64_t>(plan->rg_rows_.size());

  // 1. Row-group order.
  plan->order_.resize(static_cast<size_t>(n_rg));
  std::iota(plan->order_.begin(), plan->order_.end(), 0);
  if (o.shuffle) {
    CounterRng rng(o.seed, o.epoch, static_cast<uint64_t>(Purpose::kFileOrder), 0);
    auto perm = Permutation(n_rg, rng);
    for (int64_t i = 0; i < n_rg; ++i) {
      plan->order_[static_cast<size_t>(i)] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
    }
  }
  plan->order_offsets_.assign(static_cast<size_t>(n_rg) + 1, 0);
  for (int64_t i = 0; i < n_rg; ++i) {
    plan->order_offsets_[static_cast<size_t>(i) + 1] =
        plan->order_offsets_[static_cast<size_t>(i)] +
        plan->rg_rows_[static_cast<size_t>(plan->order_[static_cast<size_t>(i)])];
  }
  plan->total_rows_ = plan->order_offsets_.back();

  // 2. Mixing windows of w row groups with rows (without shuffle a window is one
  // row group, in order; with shuffle="global" one window of them all).  Row
  // groups with none (a filter's pruned ones) join the window they fall in
  // without counting, so a filter does not thin out what a window mixes.
  const int64_t w = plan->WindowSize();
  int64_t counted = 0;
  for (int64_t i = 0; i < n_rg; ++i) {
    const auto rg = static_cast<size_t>(plan->order_[static_cast<size_t>(i)]);
    const bool has_rows = plan->rg_rows_[rg] > 0;
    if (i == 0 || (has_rows && counted == w)) {
      plan->window_first_.push_back(i);
      plan->window_offsets_.push_back(plan->order_offsets_[static_cast<size_t>(i)]);
      counted = 0;
    }
    counted += has_rows ? 1 : 0;
  }
  if (plan->window_first_.empty()) {  // no row groups: one empty window
    plan->window_first_.push_back(0);
    plan->window_offsets_.push_back(0);
  }
  plan->window_first_.push_back(n_rg);
  plan->window_offsets_.push_back(plan->total_rows_);
  if (o.shuffle && o.global_shuffle) {
    CounterRng rng(o.seed, o.epoch, static_cast<uint64_t>(Purpose::kGlobalPermutation), 0);
    plan->global_.emplace(plan->total_rows_, rng);
    const int64_t most = 4 * std::max<int64_t>(n_rg, 1);
    while (plan->locate_shift_ < 62 && (plan->total_rows_ >> plan->locate_shift_) > most) {
      ++plan->locate_shift_;
    }
    const int64_t buckets = (plan->total_rows_ >> plan->locate_shift_) + 1;
    plan->locate_start_.resize(static_cast<size_t>(buckets));
    size_t k = 0;
    for (int64_t b = 0; b < buckets; ++b) {
      const int64_t start = b << plan->locate_shift_;
      while (k + 1 < static_cast<size_t>(n_rg) && plan->order_offsets_[k + 1] <= start) ++k;
      plan->locate_start_[static_cast<size_t>(b)] = static_cast<int32_t>(k);
    }
  }

  // 3. This rank's slice and its batch layout.
  const int64_t N = plan->total_rows_, W = o.world_size, B = o.batch_size, r = o.rank;
  if (o.drop_last) {
    plan->num_batches_ = N / B / W;  // N / (W * B), without the product (it can overflow)
    plan->rank_size_ = plan->num_batches_ * B;
    plan->rank_begin_ = r * plan->rank_size_;
    plan->full_ = plan->num_batches_;
  } else {
    const int64_t base = N / W, extra = N % W;
    plan->rank_size_ = base + (r < extra ? 1 : 0);
    plan->rank_begin_ = r * base + std::min(r, extra);
    const int64_t nb = CeilDiv(base + (extra > 0 ? 1 : 0), B);
    if (base < nb) {  // the smallest rank decides, so every rank agrees
      return Error(ErrorKind::kInvalidArgument,
                   "with drop_last=False the " + std::to_string(N) + " samples cannot give " +
                       std::to_string(W) + " ranks " + std::to_string(nb) +
                       " non-empty batches each (batch_size=" + std::to_string(B) +
                       "): the smallest rank has " + std::to_string(base) + " samples" +
                       (B == 1 ? " (with batch_size=1 the samples must divide evenly among "
                                 "the ranks)"
                               : "") +
                       "; use drop_last=True");
    }
    plan->num_batches_ = nb;
    const int64_t n = plan->rank_size_;
    int64_t f = nb;
    if (nb > n / B) f = B > 1 ? std::min(nb, (n - nb) / (B - 1)) : nb;  // n < nb * B
    plan->full_ = f;
    plan->tail_ = nb - f;
    plan->tail_rows_ = n - f * B;
  }
  return std::shared_ptr<const EpochPlan>(std::move(plan));
}

int64_t EpochPlan::BatchBegin(int64_t b) const {
  const int64_t B = options_.batch_size;
  if (b <= full_) return b * B;
  const int64_t t = b - full_;
  const int64_t q = tail_rows_ / tail_, extra = tail_rows_ % tail_;
  return full_ * B + t * q + std::min(t, extra);
}

int64_t EpochPlan::BatchSize(int64_t b) const { return BatchBegin(b + 1) - BatchBegin(b); }

int64_t EpochPlan::BatchOf(int64_t pos) const {
  const int64_t B = options_.batch_size;
  if (pos < full_ * B) return pos / B;
  const int64_t p = pos - full_ * B;
  const int64_t q = tail_rows_ / tail_, extra = tail_rows_ % tail_;
  if (p < extra * (q + 1)) return full_ + p / (q + 1);
  return full_ + extra + (p - extra * (q + 1)) / q;
}

int64_t EpochPlan::WindowOf(int64_t global_pos) const {
  auto it = std::upper_bound(window_offsets_.begin(), window_offsets_.end() - 1, global_pos);
  return static_cast<int64_t>(it - window_offsets_.begin()) - 1;
}

std::shared_ptr<const std::vector<int64_t>> EpochPlan::WindowPermutation(int64_t w) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = perms_.find(w);
    if (it != perms_.end()) return it->second;
  }
  CounterRng rng(options_.seed, options_.epoch, static_cast<uint64_t>(Purpose::kMixingWindow),
                 static_cast<uint64_t>(w));
  auto perm =
      std::make_shared<const std::vector<int64_t>>(Permutation(WindowEnd(w) - WindowBegin(w), rng));
  std::lock_guard<std::mutex> lock(mu_);
  // Windows are consumed in increasing order: the lowest index is the oldest.
  if (perms_.size() >= kCachedPermutations) perms_.erase(perms_.begin());
  perms_.emplace(w, perm);
  return perm;
}

size_t EpochPlan::LocateGlobal(int64_t global) const {
  // The last row group starting at or before `global`: from its bucket's
  // first (a step or two: a bucket is at most a quarter of a row group on
  // average), empty row groups skipped by the search.
  size_t k = static_cast<size_t>(locate_start_[static_cast<size_t>(global >> locate_shift_)]);
  while (k + 1 < order_.size() && order_offsets_[k + 1] <= global) ++k;
  return k;
}

void EpochPlan::Resolve(int64_t begin, int64_t end, std::vector<SampleRef>* out) const {
  out->clear();
  out->reserve(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  int64_t pos = begin;
  while (pos < end) {
    const int64_t w = WindowOf(pos);
    const int64_t wbegin = WindowBegin(w), wend = std::min(WindowEnd(w), end);
    const auto first = static_cast<size_t>(WindowFirst(w));
    const auto last = static_cast<size_t>(WindowFirst(w + 1));
    // Row groups of this window occupy order_offsets_[first..last].
    auto locate = [&](int64_t global) {
      auto it = std::upper_bound(order_offsets_.begin() + static_cast<int64_t>(first),
                                 order_offsets_.begin() + static_cast<int64_t>(last), global);
      const auto k = static_cast<size_t>(it - order_offsets_.begin()) - 1;
      return SampleRef{order_[k], global - order_offsets_[k]};
    };
    if (global_) {
      // One window (wbegin = 0): positions are indices of the permutation.
      std::vector<int64_t> images(static_cast<size_t>(wend - pos));
      global_->Map(pos - wbegin, wend - wbegin, images.data());
      for (int64_t image : images) {
        const size_t k = LocateGlobal(wbegin + image);
        out->push_back(SampleRef{order_[k], wbegin + image - order_offsets_[k]});
      }
      pos = wend;
    } else if (options_.shuffle) {
      const auto perm = WindowPermutation(w);
      for (; pos < wend; ++pos) {
        out->push_back(locate(wbegin + (*perm)[static_cast<size_t>(pos - wbegin)]));
      }
    } else {
      for (; pos < wend; ++pos) out->push_back(locate(pos));
    }
  }
}

}  // namespace shardfeed
