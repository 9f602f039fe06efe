#include "tier/entry_changes.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "util/test_util.h"

namespace shardfeed {
namespace {

void Write(const std::filesystem::path& path, size_t bytes) {
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
}

TEST(EntryChanges, AnEntryCutShortInPlaceAfterItsMarkIsChanged) {
  testing::TempDir dir;
  const auto entry = dir.path() / "0123456789abcdef.sfd";
  Write(entry, 3000);
  EntryChanges changes(dir.path().string());
  const uint64_t mark = changes.Mark();
  EXPECT_FALSE(changes.ChangedSince(entry.string(), mark, 3000));
  ASSERT_EQ(::truncate(entry.c_str(), 64), 0);  // another program, in place
  changes.Mark();
  EXPECT_TRUE(changes.ChangedSince(entry.string(), mark, 3000));
  // Mapped again after the change (a later mark): that mapping is whole.
  EXPECT_FALSE(changes.ChangedSince(entry.string(), changes.Mark(), 64));
}

TEST(EntryChanges, ACutWhoseEventIsNotReadYetIsSeenBySize) {
  // A truncation in progress zeroes the page of its new end before its event
  // is queued: a reader checking then has no event, but the size is set.
  testing::TempDir dir;
  const auto entry = dir.path() / "0123456789abcdef.sfd";
  Write(entry, 3000);
  EntryChanges changes(dir.path().string());
  const uint64_t mark = changes.Mark();
  ASSERT_EQ(::truncate(entry.c_str(), 1000), 0);
  EXPECT_TRUE(changes.ChangedSince(entry.string(), mark, 3000));  // no Mark() since
  EXPECT_FALSE(changes.ChangedSince(entry.string(), mark, 1000));
}

TEST(EntryChanges, TemporariesLocksAndOtherEntriesAreNotTheEntry) {
  testing::TempDir dir;
  const auto entry = dir.path() / "0123456789abcdef.sfd";
  Write(entry, 100);
  EntryChanges changes(dir.path().string());
  const uint64_t mark = changes.Mark();
  // The tier's own writes: a temporary renamed over the entry, its lock's stamp.
  Write(dir.path() / ".tmp-tier-1-2.sfd", 200);
  std::filesystem::rename(dir.path() / ".tmp-tier-1-2.sfd", entry);
  Write(dir.path() / "0123456789abcdef.lock", 10);
  Write(dir.path() / "fedcba9876543210.sfd", 10);  // another entry
  changes.Mark();
  EXPECT_FALSE(changes.ChangedSince(entry.string(), mark, 100));
  EXPECT_TRUE(changes.ChangedSince((dir.path() / "fedcba9876543210.sfd").string(), mark, 10));
}

TEST(EntryChanges, OneWatchPerFolderWhileATierHoldsIt) {
  testing::TempDir dir, other;
  auto a = EntryChanges::For(dir.path().string());
  EXPECT_EQ(a, EntryChanges::For(dir.path().string()));
  EXPECT_NE(a, EntryChanges::For(other.path().string()));
  a.reset();
  auto again = EntryChanges::For(dir.path().string());  // the last holder let it go
  EXPECT_EQ(again.use_count(), 1);
}

TEST(EntryChanges, AFolderThatCannotBeWatchedSeesNothing) {
  EntryChanges changes("/nonexistent/shardfeed-test");
  const uint64_t mark = changes.Mark();
  EXPECT_EQ(mark, 0u);
  EXPECT_FALSE(changes.ChangedSince("/nonexistent/shardfeed-test/a.sfd", mark, 10));
}

}  // namespace
}  // namespace shardfeed
