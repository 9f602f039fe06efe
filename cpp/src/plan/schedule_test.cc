#include "plan/schedule.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "shardfeed/status.h"

namespace shardfeed {
namespace {

// Row-group sizes of the swept datasets: uneven, tiny, one row group, many.
const std::vector<std::vector<int64_t>> kDatasets = {
    {10, 20, 5, 33, 1, 8, 13},
    {7},
    {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {40, 1, 1, 25, 60, 2},
};

// Calls `check(plan)` for every plan of the sweep that can be made.
template <typename Check>
void ForEachPlan(Check&& check) {
  for (const auto& rows : kDatasets) {
    for (int64_t batch : {1, 3, 7, 16}) {
      for (int64_t world : {1, 2, 3}) {
        for (int64_t rank = 0; rank < world; ++rank) {
          for (int64_t window : {1, 2, 3}) {
            for (bool shuffle : {true, false}) {
              for (bool drop_last : {true, false}) {
                PlanOptions o;
                o.seed = 11;
                o.epoch = static_cast<uint64_t>(rank + window);
                o.batch_size = batch;
                o.world_size = world;
                o.rank = rank;
                o.window_row_groups = window;
                o.shuffle = shuffle;
                o.drop_last = drop_last;
                auto plan = EpochPlan::Make(rows, o);
                if (!plan.ok()) continue;  // too few samples for drop_last=false
                SCOPED_TRACE("rows " + std::to_string(rows.size()) + " batch " +
                             std::to_string(batch) + " world " + std::to_string(world) + " rank " +
                             std::to_string(rank) + " window " + std::to_string(window) +
                             " shuffle " + std::to_string(shuffle) + " drop_last " +
                             std::to_string(drop_last));
                check(*plan);
              }
            }
          }
        }
      }
    }
  }
}

std::vector<int64_t> StartsOf(const EpochPlan& plan) {
  const int64_t nb = plan.num_batches();
  std::set<int64_t> starts = {0, std::min<int64_t>(1, nb), nb / 2, std::max<int64_t>(0, nb - 1),
                              nb};
  return {starts.begin(), starts.end()};
}

// Calls `check(schedule)` for every start batch, stride and offset of the sweep.
template <typename Check>
void ForEachSchedule(Check&& check) {
  ForEachPlan([&](const std::shared_ptr<const EpochPlan>& plan) {
    for (int64_t start : StartsOf(*plan)) {
      for (int64_t stride : {1, 2, 3, 5}) {
        for (int64_t offset = 0; offset < stride; ++offset) {
          SCOPED_TRACE("start " + std::to_string(start) + " stride " + std::to_string(stride) +
                       " offset " + std::to_string(offset));
          check(*Schedule::Make(plan, start, offset, stride).ValueOrDie());
        }
      }
    }
  });
}

// The units of the offsets of one stride, taken round-robin as PyTorch takes
// DataLoader workers' batches, give the rank's batches start, start + 1, ...
TEST(Schedule, OffsetsOfAStridePartitionTheBatchesInOrder) {
  ForEachPlan([](const std::shared_ptr<const EpochPlan>& plan) {
    for (int64_t start : StartsOf(*plan)) {
      for (int64_t stride : {1, 2, 3, 5}) {
        std::vector<std::shared_ptr<const Schedule>> parts;
        int64_t total = 0;
        for (int64_t offset = 0; offset < stride; ++offset) {
          parts.push_back(Schedule::Make(plan, start, offset, stride).ValueOrDie());
          total += parts.back()->num_units();
        }
        ASSERT_EQ(total, plan->num_batches() - start);
        for (int64_t j = 0; j < total; ++j) {
          const auto& part = *parts[static_cast<size_t>(j % stride)];
          ASSERT_LT(j / stride, part.num_units());
          ASSERT_EQ(part.BatchOfUnit(j / stride), start + j);
        }
      }
    }
  });
}

// One engine's units read the rank's slice from its start batch on, batch
// after batch, without gap or overlap.
TEST(Schedule, UnitSpansTileTheRankSlice) {
  ForEachPlan([](const std::shared_ptr<const EpochPlan>& plan) {
    for (int64_t start : StartsOf(*plan)) {
      auto s = Schedule::Make(plan, start, 0, 1).ValueOrDie();
      const int64_t rank_end = plan->rank_begin() + plan->rank_size();
      int64_t pos =
          start < plan->num_batches() ? plan->rank_begin() + plan->BatchBegin(start) : rank_end;
      for (int64_t k = 0; k < s->num_units(); ++k) {
        const Span span = s->UnitSpan(k);
        ASSERT_EQ(span.begin, pos);
        ASSERT_GT(span.end, span.begin);
        ASSERT_EQ(span.end - span.begin, plan->BatchSize(s->BatchOfUnit(k)));
        pos = span.end;
      }
      ASSERT_EQ(pos, rank_end);
    }
  });
}

// UnitRange, UnitWindows and NeededRowGroups agree with resolving every unit.
TEST(Schedule, WindowsAndRowGroupsMatchResolvingEveryUnit) {
  ForEachSchedule([](const Schedule& s) {
    const EpochPlan& plan = s.plan();
    std::map<int64_t, std::set<int64_t>> units_of_window;
    std::map<int64_t, std::set<int32_t>> rgs_of_window;
    std::vector<SampleRef> samples;
    for (int64_t k = 0; k < s.num_units(); ++k) {
      const Span span = s.UnitSpan(k);
      s.ResolveUnit(k, &samples);
      ASSERT_EQ(static_cast<int64_t>(samples.size()), span.end - span.begin);
      const Interval windows = s.UnitWindows(k);
      for (int64_t p = span.begin; p < span.end; ++p) {
        const int64_t w = s.WindowOf(p);
        ASSERT_GE(w, windows.first);
        ASSERT_LE(w, windows.last);
        ASSERT_GE(p, plan.WindowBegin(w));
        ASSERT_LT(p, plan.WindowEnd(w));
        units_of_window[w].insert(k);
        rgs_of_window[w].insert(samples[static_cast<size_t>(p - span.begin)].row_group);
      }
      ASSERT_EQ(s.WindowOf(span.begin), windows.first);
      ASSERT_EQ(s.WindowOf(span.end - 1), windows.last);
    }
    for (int64_t w = 0; w < s.num_windows(); ++w) {
      const Interval units = s.UnitRange(w);
      const auto& expected_units = units_of_window[w];
      ASSERT_EQ(units.size(), static_cast<int64_t>(expected_units.size())) << "window " << w;
      ASSERT_EQ(s.UnitsOverlapping(w), units.size());
      if (!units.empty()) {
        ASSERT_EQ(units.first, *expected_units.begin());
        ASSERT_EQ(units.last, *expected_units.rbegin());
      }
      const std::vector<int32_t> needed = s.NeededRowGroups(w);
      const std::set<int32_t> unique(needed.begin(), needed.end());
      ASSERT_EQ(unique.size(), needed.size()) << "window " << w << " lists a row group twice";
      ASSERT_EQ(unique, rgs_of_window[w]) << "window " << w;
      ASSERT_EQ(s.NeededRowGroups(w), needed);  // the memo gives the same answer
    }
  });
}

// Catalog file of each row group in the sweep's datasets: a few row groups a
// file, files out of order so that first use differs from file index.
std::vector<int32_t> FilesOf(const EpochPlan& plan) {
  std::vector<int32_t> file_of_rg(plan.order().size());
  for (size_t rg = 0; rg < file_of_rg.size(); ++rg) {
    file_of_rg[rg] = static_cast<int32_t>((rg * 7 % file_of_rg.size()) / 2);
  }
  return file_of_rg;
}

// Each file the units read is listed once, no other, in order of first need
// (by window: a file first needed in an earlier window comes first).
TEST(Schedule, FileFirstUseOrderListsNeededFilesOnceInOrderOfNeed) {
  ForEachSchedule([](const Schedule& s) {
    const std::vector<int32_t> file_of_rg = FilesOf(s.plan());
    std::map<int32_t, int64_t> first_window;
    std::vector<SampleRef> samples;
    for (int64_t k = 0; k < s.num_units(); ++k) {
      const Span span = s.UnitSpan(k);
      s.ResolveUnit(k, &samples);
      for (int64_t p = span.begin; p < span.end; ++p) {
        const int32_t f =
            file_of_rg[static_cast<size_t>(samples[static_cast<size_t>(p - span.begin)].row_group)];
        auto [it, inserted] = first_window.try_emplace(f, s.WindowOf(p));
        if (!inserted) it->second = std::min(it->second, s.WindowOf(p));
      }
    }
    const std::vector<int32_t> order = s.FileFirstUseOrder(file_of_rg);
    ASSERT_EQ(order.size(), first_window.size());
    int64_t previous = -1;
    for (int32_t f : order) {
      ASSERT_TRUE(first_window.count(f)) << "file " << f << " is not read";
      ASSERT_GE(first_window[f], previous) << "file " << f << " listed out of order";
      previous = first_window[f];
    }
  });
}

TEST(Schedule, InvalidStartOffsetOrStrideIsInvalidArgument) {
  PlanOptions o;
  o.batch_size = 10;
  auto plan = EpochPlan::Make({35, 40}, o).ValueOrDie();
  ASSERT_EQ(plan->num_batches(), 7);
  auto kind = [&](int64_t start, int64_t offset, int64_t stride) {
    return KindOf(Schedule::Make(plan, start, offset, stride).status());
  };
  for (auto [start, offset, stride] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {-1, 0, 1}, {8, 0, 1}, {0, -1, 2}, {0, 2, 2}, {0, 0, 0}, {0, 0, -3}}) {
    EXPECT_EQ(kind(start, offset, stride), ErrorKind::kInvalidArgument)
        << start << " " << offset << " " << stride;
  }
  EXPECT_EQ(KindOf(Schedule::Make(nullptr, 0, 0, 1).status()), ErrorKind::kInvalidArgument);
  // A resume at the very end, or a worker past the last batch, has nothing to do.
  EXPECT_EQ(Schedule::Make(plan, 7, 0, 1).ValueOrDie()->num_units(), 0);
  EXPECT_EQ(Schedule::Make(plan, 6, 1, 2).ValueOrDie()->num_units(), 0);
  EXPECT_EQ(Schedule::Make(plan, 6, 0, 2).ValueOrDie()->num_units(), 1);
}

// Many workers asking for windows at once get the answers of a fresh schedule.
TEST(Schedule, NeededRowGroupsIsSafeFromManyThreads) {
  PlanOptions o;
  o.batch_size = 3;
  o.window_row_groups = 2;
  o.world_size = 2;
  o.rank = 1;
  std::vector<int64_t> rows(40);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = 1 + static_cast<int64_t>(i * 5 % 11);
  auto plan = EpochPlan::Make(rows, o).ValueOrDie();
  auto shared = Schedule::Make(plan, 2, 1, 3).ValueOrDie();
  std::vector<std::vector<int32_t>> expected;
  for (int64_t w = 0; w < shared->num_windows(); ++w) {
    expected.push_back(Schedule::Make(plan, 2, 1, 3).ValueOrDie()->NeededRowGroups(w));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const int64_t w = (i * (t + 1) + t) % shared->num_windows();
        if (shared->NeededRowGroups(w) != expected[static_cast<size_t>(w)]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace shardfeed
