#include "shardfeed/plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

std::vector<int64_t> Ids(const std::vector<int64_t>& rows, const PlanOptions& o) {
  auto plan = EpochPlan::Make(rows, o).ValueOrDie();
  std::vector<int64_t> first(rows.size() + 1, 0);
  std::partial_sum(rows.begin(), rows.end(), first.begin() + 1);
  std::vector<SampleRef> samples;
  plan->Resolve(plan->rank_begin(), plan->rank_begin() + plan->rank_size(), &samples);
  std::vector<int64_t> ids;
  for (const auto& s : samples) ids.push_back(first[static_cast<size_t>(s.row_group)] + s.row);
  return ids;
}

TEST(EpochPlan, NoShuffleIsTheNaturalOrder) {
  PlanOptions o;
  o.shuffle = false;
  o.batch_size = 4;
  o.drop_last = false;
  auto ids = Ids({3, 5, 2}, o);
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ids, expected);
}

TEST(EpochPlan, ShuffledEpochIsAPermutationThatChangesWithEpochAndSeed) {
  PlanOptions o;
  o.batch_size = 7;
  o.drop_last = false;
  o.window_row_groups = 3;
  const std::vector<int64_t> rows = {10, 20, 5, 33, 1, 8, 13};
  auto ids = Ids(rows, o);
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(90);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  EXPECT_EQ(ids, Ids(rows, o));  // pure
  PlanOptions other_epoch = o;
  other_epoch.epoch = 1;
  EXPECT_NE(ids, Ids(rows, other_epoch));
  PlanOptions other_seed = o;
  other_seed.seed = 99;
  EXPECT_NE(ids, Ids(rows, other_seed));
}

TEST(EpochPlan, RanksAreDisjointEqualAndCoverTheEpoch) {
  const std::vector<int64_t> rows = {100, 37, 64, 5, 90};
  for (bool drop_last : {true, false}) {
    for (int64_t world = 1; world <= 5; ++world) {
      PlanOptions o;
      o.batch_size = 16;
      o.world_size = world;
      o.drop_last = drop_last;
      std::set<int64_t> all;
      int64_t total = 0, batches = -1;
      for (int64_t r = 0; r < world; ++r) {
        o.rank = r;
        auto plan = EpochPlan::Make(rows, o).ValueOrDie();
        if (batches < 0) batches = plan->num_batches();
        EXPECT_EQ(plan->num_batches(), batches) << "world " << world;
        for (int64_t b = 0; b < plan->num_batches(); ++b) {
          EXPECT_GE(plan->BatchSize(b), 1);
          EXPECT_LE(plan->BatchSize(b), 16);
        }
        auto ids = Ids(rows, o);
        total += static_cast<int64_t>(ids.size());
        all.insert(ids.begin(), ids.end());
      }
      EXPECT_EQ(static_cast<int64_t>(all.size()), total) << "ranks overlap";
      const int64_t expected = drop_last ? (296 / (16 * world)) * 16 * world : 296;
      EXPECT_EQ(total, expected);
    }
  }
}

TEST(EpochPlan, WindowsCountOnlyRowGroupsWithRows) {
  // A filter's pruned row groups (0 rows) join windows without thinning them out:
  // every window but the last mixes `window` row groups that have rows.
  const std::vector<int64_t> rows = {0, 4, 0, 0, 3, 5, 0, 0, 0, 2, 6, 0, 1, 0};
  PlanOptions o;
  o.batch_size = 3;
  o.drop_last = false;
  o.window_row_groups = 2;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    o.seed = seed;
    auto plan = EpochPlan::Make(rows, o).ValueOrDie();
    ASSERT_EQ(plan->num_windows(), 3);  // 6 row groups with rows, 2 at a time
    ASSERT_EQ(plan->WindowFirst(0), 0);
    ASSERT_EQ(plan->WindowFirst(plan->num_windows()), static_cast<int64_t>(rows.size()));
    int64_t rows_before = 0;
    for (int64_t w = 0; w < plan->num_windows(); ++w) {
      int64_t with_rows = 0, window_rows = 0;
      for (int64_t i = plan->WindowFirst(w); i < plan->WindowFirst(w + 1); ++i) {
        const int64_t n = rows[static_cast<size_t>(plan->order()[static_cast<size_t>(i)])];
        with_rows += n > 0;
        window_rows += n;
      }
      EXPECT_EQ(with_rows, 2) << "seed " << seed << ", window " << w;
      EXPECT_EQ(plan->WindowBegin(w), rows_before);
      rows_before += window_rows;
      EXPECT_EQ(plan->WindowEnd(w), rows_before);
      // Each window's positions resolve to its own row groups.
      std::vector<SampleRef> samples;
      plan->Resolve(plan->WindowBegin(w), plan->WindowEnd(w), &samples);
      for (const auto& sample : samples) {
        const auto& order = plan->order();
        const auto at = std::find(order.begin(), order.end(), sample.row_group) - order.begin();
        EXPECT_GE(at, plan->WindowFirst(w));
        EXPECT_LT(at, plan->WindowFirst(w + 1));
        EXPECT_LT(sample.row, rows[static_cast<size_t>(sample.row_group)]);
      }
    }
    auto ids = Ids(rows, o);
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> all(21);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(ids, all);
  }
  // Nothing with rows: one empty window.
  auto empty = EpochPlan::Make({0, 0, 0}, o).ValueOrDie();
  EXPECT_EQ(empty->num_windows(), 1);
  EXPECT_EQ(empty->WindowEnd(0), 0);
}

TEST(EpochPlan, BatchOfInvertsBatchBegin) {
  PlanOptions o;
  o.batch_size = 4;
  o.world_size = 2;
  o.rank = 1;
  o.drop_last = false;
  auto plan = EpochPlan::Make({9}, o).ValueOrDie();  // rank 1 has 4 rows in 2 batches
  ASSERT_EQ(plan->num_batches(), 2);
  EXPECT_EQ(plan->BatchSize(0) + plan->BatchSize(1), 4);
  for (int64_t b = 0; b < plan->num_batches(); ++b) {
    for (int64_t p = plan->BatchBegin(b); p < plan->BatchBegin(b) + plan->BatchSize(b); ++p) {
      EXPECT_EQ(plan->BatchOf(p), b);
    }
  }
}

TEST(EpochPlan, SizesNearTheInt64LimitDoNotOverflow) {
  // world_size * batch_size wrapped to 0 (SIGFPE) or to a small number (rank 0 of 2^62
  // ranks got most of the data); (N + B - 1) / B wrapped and gave no batch at all.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  PlanOptions o;
  o.world_size = int64_t{1} << 54;
  o.batch_size = 1024;
  EXPECT_EQ(EpochPlan::Make({222}, o).ValueOrDie()->num_batches(), 0);
  o.world_size = (int64_t{1} << 62) + 1;
  o.batch_size = 4;
  EXPECT_EQ(EpochPlan::Make({222}, o).ValueOrDie()->num_batches(), 0);
  o.world_size = 1;
  o.batch_size = kMax;
  o.drop_last = false;
  auto plan = EpochPlan::Make({222}, o).ValueOrDie();
  ASSERT_EQ(plan->num_batches(), 1);
  EXPECT_EQ(plan->BatchSize(0), 222);
  o.batch_size = kMax - 1;
  o.world_size = 2;
  EXPECT_EQ(EpochPlan::Make({222}, o).ValueOrDie()->num_batches(), 1);
}

TEST(EpochPlan, RejectsBadSettings) {
  PlanOptions o;
  o.batch_size = 0;
  EXPECT_EQ(KindOf(EpochPlan::Make({10}, o).status()), ErrorKind::kInvalidArgument);
  o.batch_size = 1;
  o.world_size = 2;
  o.rank = 2;
  EXPECT_FALSE(EpochPlan::Make({10}, o).ok());
  o.rank = 0;
  o.world_size = 5;
  o.drop_last = false;
  EXPECT_FALSE(EpochPlan::Make({3}, o).ok());  // 3 samples cannot fill 5 ranks
}

TEST(EpochPlan, GlobalShuffleIsOneWindowPermutedPerEpochAndSlicedByRank) {
  const std::vector<int64_t> rows = {300, 5, 0, 257, 1000, 64};
  const int64_t total = 300 + 5 + 257 + 1000 + 64;
  PlanOptions o;
  o.global_shuffle = true;
  o.window_row_groups = 2;  // ignored
  o.batch_size = 7;
  o.drop_last = false;
  auto plan = EpochPlan::Make(rows, o).ValueOrDie();
  EXPECT_EQ(plan->num_windows(), 1);
  EXPECT_EQ(plan->WindowSize(), static_cast<int64_t>(rows.size()));
  auto all = Ids(rows, o);
  auto sorted = all;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> natural(static_cast<size_t>(total));
  std::iota(natural.begin(), natural.end(), 0);
  EXPECT_EQ(sorted, natural);
  // Ranks: contiguous slices of the same sequence, whatever the world size.
  for (int64_t world : {2, 3}) {
    std::vector<int64_t> joined;
    for (int64_t r = 0; r < world; ++r) {
      PlanOptions ro = o;
      ro.world_size = world;
      ro.rank = r;
      auto part = Ids(rows, ro);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined, all);
  }
  PlanOptions next = o;
  next.epoch = 1;
  EXPECT_NE(Ids(rows, next), all);
  PlanOptions off = o;
  off.shuffle = false;
  EXPECT_FALSE(EpochPlan::Make(rows, off).ok());
}

TEST(PlanOptions, ValidateNamesTheSetting) {
  EXPECT_TRUE(PlanOptions{}.Validate().ok());
  PlanOptions o;
  o.window_row_groups = 0;
  const auto st = o.Validate();
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidArgument);
  EXPECT_NE(st.message().find("shuffle_window"), std::string::npos) << st.message();
  o = PlanOptions{};
  o.world_size = 0;
  EXPECT_NE(o.Validate().message().find("world_size"), std::string::npos);
}

}  // namespace
}  // namespace shardfeed
