#include "tier/usage_ledger.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tier/decoded_tier_internal.h"
#include "tier/tier_test_util.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::Int64Column;

int64_t EntryBytes(const std::filesystem::path& dir) {
  int64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".sfd") bytes += static_cast<int64_t>(e.file_size());
  }
  return bytes;
}

TEST(UsageLedger, TwoLedgersOfOneFileShareTheCount) {
  testing::TempDir dir;
  const std::string path = (dir.path() / kUsageName).string();
  UsageLedger a(path, 100);
  UsageLedger b(path, 100);
  ASSERT_TRUE(a.shared());
  int64_t seen = -1;
  EXPECT_TRUE(a.Reserve(50, 200, &seen));
  EXPECT_EQ(seen, 100);
  EXPECT_FALSE(b.Reserve(51, 200, &seen));  // a's 50 count
  EXPECT_EQ(seen, 150);
  EXPECT_TRUE(b.Reserve(50, 200, &seen));
  EXPECT_EQ(a.Count(), 200);
  a.Release(500);  // not below zero
  EXPECT_EQ(b.Count(), 0);
  EXPECT_TRUE(b.Reserve(int64_t{1} << 40, 0, &seen));  // no limit
  EXPECT_FALSE(a.Reserve(1, 10, &seen));
}

TEST(UsageLedger, ThreadsOfTwoLedgersNeverPassTheLimit) {
  testing::TempDir dir;
  const std::string path = (dir.path() / kUsageName).string();
  UsageLedger a(path, 0), b(path, 0);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      UsageLedger& ledger = t % 2 ? a : b;
      for (int i = 0; i < 300; ++i) {
        if (ledger.Reserve(1, 1000, nullptr)) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1000);
  EXPECT_EQ(a.Count(), 1000);
}

TEST(UsageLedger, ADamagedFileIsRewrittenAndAMissingFolderCountsAlone) {
  testing::TempDir dir;
  const auto path = dir.path() / kUsageName;
  UsageLedger a(path.string(), 10);
  testing::WriteText(path, "abc");  // short: this process's count is written back
  EXPECT_TRUE(a.Reserve(5, 100, nullptr));
  EXPECT_EQ(std::filesystem::file_size(path), 8u);
  UsageLedger b(path.string(), 15);
  EXPECT_EQ(b.Count(), 15);
  testing::WriteText(path, std::string(8, '\xff'));  // past any real count
  EXPECT_EQ(b.Count(), 15);
  std::filesystem::remove(path);
  std::filesystem::create_directories(path / "inside");  // not a file: removed
  UsageLedger c(path.string(), 7);
  EXPECT_TRUE(c.shared());
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
  EXPECT_EQ(c.Count(), 7);
  // No folder to make it in: this process's count alone.
  UsageLedger d((dir.path() / "missing" / kUsageName).string(), 7);
  EXPECT_FALSE(d.shared());
  EXPECT_TRUE(d.Reserve(3, 10, nullptr));
  EXPECT_FALSE(d.Reserve(1, 10, nullptr));
}

TEST(UsageLedger, TiersOpenedAtOnceByTwoProcessesShareTheLimit) {
  // Two ranks open the folder before either stores (each used to count the
  // folder as it found it, plus its own stores: twice the limit between them).
  testing::TempDir dir;
  const std::string folder = (dir.path() / "decoded").string();
  auto probe = DecodedTier::Open((dir.path() / "probe").string(), 0).ValueOrDie();
  probe->impl()->Store("k", {Int64Column(0, 100)}, 100);
  const int64_t one = probe->stats().bytes_on_disk;
  const int64_t limit = 3 * one + one / 2;
  auto a = DecodedTier::Open(folder, limit).ValueOrDie();
  auto b = DecodedTier::Open(folder, limit).ValueOrDie();
  int stored = 0;
  for (int i = 0; i < 6; ++i) {
    auto& tier = i % 2 ? a : b;
    if (tier->impl()->Store("k" + std::to_string(i), {Int64Column(i, 100)}, 100)) ++stored;
  }
  EXPECT_EQ(stored, 3);
  EXPECT_LE(EntryBytes(folder), limit);
  EXPECT_EQ(a->stats().skipped + b->stats().skipped, 3);
  // Clear by one frees the room for both; a tier opened later counts the scan.
  EXPECT_EQ(a->Clear().ValueOrDie(), 3 * one);
  EXPECT_TRUE(b->impl()->Store("again", {Int64Column(0, 100)}, 100).has_value());
  std::filesystem::remove(b->impl()->PathOf("again"));  // by another program
  auto c = DecodedTier::Open(folder, limit).ValueOrDie();
  EXPECT_EQ(c->stats().bytes_on_disk, 0);
  EXPECT_EQ(b->impl()->usage_->Count(), 0);
}

TEST(UsageLedger, AnEntryStoredOverADamagedOneCountsOnce) {
  testing::TempDir dir;
  auto tier = DecodedTier::Open((dir.path() / "decoded").string(), 0).ValueOrDie();
  ASSERT_TRUE(tier->impl()->Store("k", {Int64Column(0, 100)}, 100).has_value());
  const int64_t one = tier->impl()->usage_->Count();
  ASSERT_GT(one, 0);
  {  // a flipped byte: decoded again, stored again over it
    std::fstream f(tier->impl()->PathOf("k"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(one - 1);
    f.put('\x5a');
  }
  ASSERT_TRUE(tier->impl()->Store("k", {Int64Column(0, 100)}, 100).has_value());
  EXPECT_EQ(tier->impl()->usage_->Count(), one);
  EXPECT_EQ(EntryBytes(dir.path() / "decoded"), one);
}

TEST(UsageLedger, ADamagedEntryRemovedGivesItsBytesBack) {
  testing::TempDir dir;
  auto tier = DecodedTier::Open((dir.path() / "decoded").string(), 0).ValueOrDie();
  ASSERT_TRUE(tier->impl()->Store("k", {Int64Column(0, 100)}, 100).has_value());
  const int64_t one = tier->impl()->usage_->Count();
  std::filesystem::resize_file(tier->impl()->PathOf("k"), 10);  // truncated by another program
  tier->impl()->RemoveDamaged(tier->impl()->PathOf("k"), one);  // as mapped: its whole size
  EXPECT_FALSE(std::filesystem::exists(tier->impl()->PathOf("k")));
  EXPECT_EQ(tier->impl()->usage_->Count(), 0);
  tier->impl()->RemoveDamaged(tier->impl()->PathOf("k"), one);  // gone already: nothing
  EXPECT_EQ(tier->impl()->usage_->Count(), 0);
}

}  // namespace
}  // namespace shardfeed
