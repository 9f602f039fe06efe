#include "shardfeed/filter.h"

#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

std::shared_ptr<Catalog> TwoPartitions(const TempDir& dir) {
  WriteIdFile(dir.path() / "k=1" / "a.parquet", 0, 40, 10);   // ids 0..39
  WriteIdFile(dir.path() / "k=2" / "b.parquet", 40, 40, 10);  // ids 40..79
  return Catalog::Open({dir.path().string()}).ValueOrDie();
}

TEST(Filter, PrunesByPartitionThenStatisticsThenRows) {
  TempDir dir;
  auto catalog = TwoPartitions(dir);
  FilterSpec spec = {{{"k", FilterOp::kEq, {int64_t{2}}},
                      {"id", FilterOp::kGe, {int64_t{65}}},
                      {"x", FilterOp::kNe, {33.5}}}};
  auto rows = FilteredRows::Make(*catalog, spec, "key", 2).ValueOrDie();
  const auto& c = rows->counts();
  EXPECT_EQ(c.files_pruned_by_partition, 1);
  EXPECT_EQ(c.row_groups_pruned_by_partition, 4);
  EXPECT_EQ(c.row_groups_pruned_by_statistics, 2);  // ids 40..59
  EXPECT_EQ(c.row_groups_read, 2);
  EXPECT_EQ(c.rows_kept, 14);  // 65..79 without 67 (x = 33.5)
  EXPECT_EQ(rows->pass_rows(), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 4, 10}));
  EXPECT_TRUE(rows->All(7));
  EXPECT_EQ(rows->Rows(6), (std::vector<int64_t>{5, 6, 8, 9}));
}

TEST(Filter, OrOfAndsAndSetOperators) {
  TempDir dir;
  auto catalog = TwoPartitions(dir);
  FilterSpec spec = {{{"id", FilterOp::kIn, {int64_t{1}, int64_t{77}}}},
                     {{"k", FilterOp::kNotIn, {int64_t{2}}}, {"id", FilterOp::kLt, {int64_t{3}}}}};
  auto rows = FilteredRows::Make(*catalog, spec, "key").ValueOrDie();
  EXPECT_EQ(rows->counts().rows_kept, 4);  // 0, 1, 2, 77
  EXPECT_EQ(rows->Rows(0), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(rows->Rows(7), (std::vector<int64_t>{7}));
}

TEST(Filter, ImageRoundTripsAndRejectsDamage) {
  TempDir dir;
  auto catalog = TwoPartitions(dir);
  FilterSpec spec = {{{"id", FilterOp::kGt, {int64_t{5}}}, {"id", FilterOp::kLe, {int64_t{70}}}}};
  auto rows = FilteredRows::Make(*catalog, spec, "key").ValueOrDie();
  const std::string image = rows->Serialize();
  auto back = FilteredRows::Deserialize(*catalog, "key", image);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->pass_rows(), rows->pass_rows());
  for (int32_t rg = 0; rg < 8; ++rg) EXPECT_EQ(back->Rows(rg), rows->Rows(rg));
  EXPECT_EQ(FilteredRows::Deserialize(*catalog, "other key", image), nullptr);
  EXPECT_EQ(FilteredRows::Deserialize(*catalog, "key", image.substr(0, image.size() - 1)), nullptr);
  for (size_t i = 8; i < image.size(); i += 7) {
    std::string bad = image;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    auto maybe = FilteredRows::Deserialize(*catalog, "key", bad);
    if (maybe) {
      // A flip that still parses must still describe a consistent selection.
      int64_t total = 0;
      for (int32_t rg = 0; rg < 8; ++rg) total += static_cast<int64_t>(maybe->Rows(rg).size());
      EXPECT_EQ(total, maybe->counts().rows_kept);
    }
  }
}

TEST(Filter, BadFiltersNameTheColumn) {
  TempDir dir;
  auto catalog = TwoPartitions(dir);
  auto missing = FilteredRows::Check(*catalog, {{{"nope", FilterOp::kEq, {int64_t{1}}}}});
  EXPECT_NE(missing.message().find("'nope'"), std::string::npos);
  auto wrong = FilteredRows::Check(*catalog, {{{"id", FilterOp::kEq, {std::string("a")}}}});
  EXPECT_NE(wrong.message().find("'id'"), std::string::npos);
  auto nested = FilteredRows::Check(*catalog, {{{"v", FilterOp::kEq, {int64_t{1}}}}});
  EXPECT_FALSE(nested.ok());
}

}  // namespace
}  // namespace shardfeed
