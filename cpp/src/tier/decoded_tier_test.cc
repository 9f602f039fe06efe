#include "tier/decoded_tier_internal.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <arrow/buffer.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfeed/catalog.h"
#include "shardfeed/status.h"
#include "storage/temp_file.h"
#include "tier/tier_test_util.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

namespace fs = std::filesystem;

using testing::Int64Column;

std::vector<fs::path> Entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".sfd" && e.path().filename().string()[0] != '.') {
      out.push_back(e.path());
    }
  }
  return out;
}

TEST(DecodedTier, StoreThenLoadRoundTrips) {
  testing::TempDir dir;
  auto tier = *DecodedTier::Open((dir.path() / "tier").string(), 0);
  std::vector<DecodedColumn> columns{Int64Column(100, 50), Int64Column(-7, 50)};
  columns[1].nulls.assign(50, 0);
  columns[1].nulls[3] = 1;
  tier->impl()->Store("key-a", columns, 50);
  EXPECT_FALSE((*tier->impl()->Load("key-b")).has_value());  // another key: a miss

  auto loaded = tier->impl()->Load("key-a");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  ASSERT_EQ((*loaded)->size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const auto& got = (**loaded)[k];
    EXPECT_EQ(got.dtype, DType::kInt64);
    ASSERT_EQ(got.count, 50);
    EXPECT_EQ(std::memcmp(got.values, columns[k].values, 50 * 8), 0);
  }
  EXPECT_EQ((**loaded)[1].nulls, columns[1].nulls);
  const auto stats = tier->stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_GT(stats.stored_bytes, 50 * 16);

  // Entries are private to their owner whatever the umask.
  const auto entries = Entries(dir.path() / "tier");
  ASSERT_EQ(entries.size(), 1u);
  struct stat st;
  ASSERT_EQ(::stat(entries[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir.path() / "tier").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(DecodedTier, AnEntryOfNoRowsLoads) {
  // A row group a filter left no row of: its buffers are empty, the last one
  // at the file's aligned end.  It is stored whole and loads (it was written
  // shorter than its offsets: 'damaged' on every load, decoded and written
  // again each epoch).
  testing::TempDir dir;
  auto tier = *DecodedTier::Open((dir.path() / "tier").string(), 0);
  std::vector<DecodedColumn> columns{Int64Column(0, 0), Int64Column(0, 0)};
  ASSERT_TRUE(tier->impl()->Store("empty", columns, 0).has_value());
  auto loaded = tier->impl()->Load("empty");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((**loaded)[1].count, 0);
  EXPECT_EQ(tier->stats().corrupt, 0);
}

TEST(DecodedTier, ADamagedEntryIsDiscarded) {
  testing::TempDir dir;
  const std::string folder = (dir.path() / "tier").string();
  (*DecodedTier::Open(folder, 0))->impl()->Store("key", {Int64Column(0, 1000)}, 1000);
  const auto entries = Entries(folder);
  ASSERT_EQ(entries.size(), 1u);
  {
    std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entries[0]) - 100));
    f.put('\x5a');  // a flipped value in the last buffer
  }
  auto tier = *DecodedTier::Open(folder, 0);  // a new process: it checks the digest
  auto loaded = tier->impl()->Load("key");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
  EXPECT_EQ(tier->stats().corrupt, 1);

  // A truncated entry is a miss too, and storing again replaces it.
  fs::resize_file(entries[0], 20);
  EXPECT_FALSE((*tier->impl()->Load("key")).has_value());
  tier->impl()->Store("key", {Int64Column(0, 1000)}, 1000);
  EXPECT_TRUE((*tier->impl()->Load("key")).has_value());
}

TEST(DecodedTier, AnEntryCheckedByOneProcessIsNotHashedByTheNext) {
  testing::TempDir dir;
  const std::string folder = (dir.path() / "tier").string();
  (*DecodedTier::Open(folder, 0))->impl()->Store("key", {Int64Column(0, 1000)}, 1000);
  // Each Open stands for another process (its own set of checked entries).
  auto first = *DecodedTier::Open(folder, 0);
  ASSERT_TRUE((*first->impl()->Load("key")).has_value());
  EXPECT_EQ(first->impl()->digests_checked_, 1);  // checked, and stamped
  ASSERT_TRUE((*first->impl()->Load("key")).has_value());
  EXPECT_EQ(first->impl()->digests_checked_, 1);  // once per process, as before
  auto second = *DecodedTier::Open(folder, 0);
  ASSERT_TRUE((*second->impl()->Load("key")).has_value());
  EXPECT_EQ(second->impl()->digests_checked_, 0);  // the stamp says this file was checked

  // A value flipped in place, even with the old modification time put back,
  // changes the file's change time: the stamp no longer matches.
  const auto entries = Entries(folder);
  ASSERT_EQ(entries.size(), 1u);
  struct stat before {};
  ASSERT_EQ(::stat(entries[0].c_str(), &before), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  {
    std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entries[0]) - 100));
    f.put('\x5a');
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, entries[0].c_str(), times, 0), 0);
  auto third = *DecodedTier::Open(folder, 0);
  auto loaded = third->impl()->Load("key");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
  EXPECT_EQ(third->stats().corrupt, 1);

  // A torn or foreign stamp is ignored: the entry is checked again.
  third->impl()->Store("key", {Int64Column(0, 1000)}, 1000);
  const std::string stamp = third->impl()->LockPathOf("key");
  testing::WriteText(stamp, std::string(72, '\x01'));
  auto fourth = *DecodedTier::Open(folder, 0);
  ASSERT_TRUE((*fourth->impl()->Load("key")).has_value());
  EXPECT_EQ(fourth->impl()->digests_checked_, 1);
}

TEST(DecodedTier, WhatThisProcessStoredIsTrustedOnlyIfItIsWhatItWrote) {
  testing::TempDir dir;
  const std::string folder = (dir.path() / "tier").string();
  auto tier = *DecodedTier::Open(folder, 0);
  const auto digest = tier->impl()->Store("key", {Int64Column(0, 1000)}, 1000);
  ASSERT_TRUE(digest.has_value());
  ASSERT_TRUE((*tier->impl()->Load("key", digest)).has_value());
  ASSERT_TRUE((*tier->impl()->Load("key")).has_value());  // a later epoch
  EXPECT_EQ(tier->impl()->digests_checked_, 0);           // its own buffers' digest, never hashed

  // A damaged file in the place of what a store claims: hashed, and a miss.
  const auto entries = Entries(folder);
  ASSERT_EQ(entries.size(), 1u);
  {
    std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entries[0]) - 100));
    f.put('\x5a');
  }
  auto other = *DecodedTier::Open(folder, 0);
  auto loaded = other->impl()->Load("key", *digest + 1);  // another write's digest
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
  EXPECT_EQ(other->impl()->digests_checked_, 1);

  // A store refused by the limit returns no digest.
  auto small = *DecodedTier::Open((dir.path() / "small").string(), 100);
  EXPECT_FALSE(small->impl()->Store("key", {Int64Column(0, 1000)}, 1000).has_value());
}

TEST(DecodedTier, OpenRemovesOnlyTempsWithoutALiveWriter) {
  testing::TempDir dir;
  const std::string folder = (dir.path() / "tier").string();
  ASSERT_TRUE(DecodedTier::Open(folder, 0).ok());
  // A temp whose writer died (nobody holds its flock), and a live one.
  testing::WriteText(fs::path(folder) / ".tmp-dead.sfd", "partial");
  auto live = storage_internal::TempFile::Create(folder + "/.tmp-live.sfd");
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_TRUE(DecodedTier::Open(folder, 0).ok());
  EXPECT_FALSE(fs::exists(fs::path(folder) / ".tmp-dead.sfd"));
  EXPECT_TRUE(fs::exists(fs::path(folder) / ".tmp-live.sfd"));
  live->Close();
  EXPECT_FALSE(fs::exists(fs::path(folder) / ".tmp-live.sfd"));  // uncommitted: removed
}

TEST(DecodedTier, RefusesAFolderOthersCanWrite) {
  testing::TempDir dir;
  const fs::path folder = dir.path() / "shared";
  fs::create_directories(folder);
  ::chmod(folder.c_str(), 0777);
  auto tier = DecodedTier::Open(folder.string(), 0);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(KindOf(tier.status()), ErrorKind::kInvalidArgument);
  EXPECT_NE(tier.status().message().find(folder.string()), std::string::npos);
}

TEST(DecodedTier, UsageAndClearSeeOnlyTheTiersEntries) {
  testing::TempDir dir;
  auto tier = DecodedTier::Open((dir.path() / "decoded").string(), 0).ValueOrDie();
  testing::WriteText(dir.path() / "decoded" / "notes.txt", "not the tier's");
  const std::vector<float> values = {1, 2, 3};
  std::vector<DecodedColumn> columns(1);
  columns[0].dtype = DType::kFloat32;
  columns[0].values = reinterpret_cast<const uint8_t*>(values.data());
  columns[0].count = 3;
  tier->impl()->Store("key-a", columns, 3);
  tier->impl()->Store("key-b", columns, 3);

  auto usage = tier->Usage().ValueOrDie();
  EXPECT_EQ(usage.entries, 2);
  EXPECT_EQ(usage.bytes, tier->stats().stored_bytes);
  ASSERT_TRUE(tier->impl()->Load("key-a").ValueOrDie().has_value());

  EXPECT_EQ(tier->Clear().ValueOrDie(), usage.bytes);
  usage = tier->Usage().ValueOrDie();
  EXPECT_EQ(usage.entries, 0);
  EXPECT_EQ(usage.bytes, 0);
  EXPECT_EQ(tier->stats().bytes_on_disk, 0);
  EXPECT_FALSE(tier->impl()->Load("key-a").ValueOrDie().has_value());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "decoded" / "notes.txt"));
}

TEST(DecodedTier, AnEntrysLockMakesOthersWaitThenSeeTheEntry) {
  testing::TempDir dir;
  auto a = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();
  auto b = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();  // another process's view
  auto held = a->impl()->LockEntry("k", nullptr).ValueOrDie();
  ASSERT_EQ(held.outcome, storage_internal::LockOutcome::kLocked);
  // A waiter that is told to stop gives up at once, locked by nobody.
  auto stopped = b->impl()->LockEntry("k", [] { return true; });
  EXPECT_TRUE(stopped.status().IsCancelled());
  // Another key is not held up.
  EXPECT_EQ(b->impl()->LockEntry("other", nullptr).ValueOrDie().outcome,
            storage_internal::LockOutcome::kLocked);
  // The holder stores the entry and lets go; the waiter then finds it.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto mine = b->impl()->LockEntry("k", nullptr).ValueOrDie();
    EXPECT_EQ(mine.outcome, storage_internal::LockOutcome::kLocked);
    auto loaded = b->impl()->Load("k").ValueOrDie();
    got = loaded.has_value();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  a->impl()->Store("k", {Int64Column(0, 10)}, 10);
  held = storage_internal::LockedFd{};
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST(DecodedTier, AWaiterWithOtherWorkDoesItInsteadOfSleeping) {
  testing::TempDir dir;
  auto a = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();
  auto b = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();
  auto held = a->impl()->LockEntry("k", nullptr).ValueOrDie();
  ASSERT_EQ(held.outcome, storage_internal::LockOutcome::kLocked);
  // help() is called while the entry is held, and the lock is tried again
  // after each piece of work: here the third piece is the holder letting go.
  int calls = 0;
  auto mine = b->impl()
                  ->LockEntry("k", nullptr,
                              [&] {
                                if (++calls == 3) held = storage_internal::LockedFd{};
                                return true;
                              })
                  .ValueOrDie();
  EXPECT_EQ(mine.outcome, storage_internal::LockOutcome::kLocked);
  EXPECT_EQ(calls, 3);
  // With nothing to do (false), it sleeps and still gets the lock.
  mine = storage_internal::LockedFd{};
  calls = 0;
  auto again = b->impl()->LockEntry("k", nullptr, [&] { return ++calls < 0; }).ValueOrDie();
  EXPECT_EQ(again.outcome, storage_internal::LockOutcome::kLocked);
  EXPECT_EQ(calls, 0);  // free at once: no help asked
}

TEST(DecodedTier, ClearRemovesLockFilesButNotAHeldOne) {
  testing::TempDir dir;
  auto tier = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();
  auto count_locks = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      n += e.path().extension() == ".lock" && e.path().filename() != "shardfeed.lock";
    }
    return n;
  };
  {
    auto a = tier->impl()->LockEntry("a", nullptr).ValueOrDie();
    tier->impl()->Store("a", {Int64Column(0, 10)}, 10);
  }
  auto held = tier->impl()->LockEntry("b", nullptr).ValueOrDie();
  ASSERT_EQ(count_locks(), 2);
  ASSERT_TRUE(tier->Clear().ok());
  EXPECT_EQ(count_locks(), 1);  // b's, held
  EXPECT_FALSE(tier->impl()->Load("a").ValueOrDie().has_value());
  held = storage_internal::LockedFd{};
  ASSERT_TRUE(tier->Clear().ok());
  EXPECT_EQ(count_locks(), 0);
  // The protocol still works on a cleared folder.
  EXPECT_EQ(tier->impl()->LockEntry("a", nullptr).ValueOrDie().outcome,
            storage_internal::LockOutcome::kLocked);
}

TEST(DecodedTier, NoLockFileMeansNoLockNotAnError) {
  testing::TempDir dir;
  auto tier = DecodedTier::Open(dir.path().string(), 0).ValueOrDie();
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  auto lock = tier->impl()->LockEntry("k", nullptr);
  fs::permissions(dir.path(), fs::perms::owner_all);
  ASSERT_TRUE(lock.ok());
  if (::geteuid() != 0) {  // root writes anywhere
    EXPECT_NE(lock->outcome, storage_internal::LockOutcome::kLocked);
  }
}

TEST(DecodedTierPrune, RemovesWhatARewriteLeftOnceAndFreesItsBytes) {
  testing::TempDir data, tier_dir;
  testing::WriteIdFile(data.path() / "a.parquet", 0, 20, 10);
  testing::WriteIdFile(data.path() / "b.parquet", 20, 20, 10);
  auto before = Catalog::Open({data.path().string()}).ValueOrDie();
  const auto old_keys = testing::TierKeysByFile(*before);
  auto tier = DecodedTier::Open(tier_dir.path().string(), 0).ValueOrDie();
  for (const auto& [name, key] : old_keys) {
    ASSERT_TRUE(tier->impl()->Store(key, {Int64Column(0, 10)}, 10).has_value());
  }
  ASSERT_TRUE(tier->impl()->Store("key-other", {Int64Column(0, 10)}, 10).has_value());
  const int64_t before_bytes = tier->stats().bytes_on_disk;

  testing::WriteIdFile(data.path() / "a.parquet", 100, 30, 10);
  auto after = Catalog::Open({data.path().string()}).ValueOrDie();
  const int64_t freed = tier->impl()->PruneSuperseded(*after);
  EXPECT_GT(freed, 0);
  EXPECT_EQ(tier->stats().bytes_on_disk, before_bytes - freed);
  EXPECT_EQ(tier->impl()->PruneSuperseded(*after), 0);  // once per catalog
  for (const auto& [name, key] : old_keys) {
    const bool kept = std::filesystem::exists(tier->impl()->PathOf(key));
    EXPECT_EQ(kept, name == "b.parquet") << name;
  }
  EXPECT_TRUE(std::filesystem::exists(tier->impl()->PathOf("key-other")));
  EXPECT_EQ(tier->Usage().ValueOrDie().entries, 3);  // b's two and key-other

  // Rewritten again with as many rows (the same catalog fingerprint): once per
  // version, not per fingerprint.
  const auto second_keys = testing::TierKeysByFile(*after);
  for (const auto& [name, key] : second_keys) {
    if (name == "a.parquet") tier->impl()->Store(key, {Int64Column(0, 10)}, 10);
  }
  testing::WriteIdFile(data.path() / "a.parquet", 500, 30, 10);
  auto third = Catalog::Open({data.path().string()}).ValueOrDie();
  ASSERT_EQ(third->fingerprint(), after->fingerprint());
  EXPECT_GT(tier->impl()->PruneSuperseded(*third), 0);
  EXPECT_EQ(tier->Usage().ValueOrDie().entries, 3);
}

TEST(DecodedTierPrune, AFullTierMakesRoomWhenAsked) {
  testing::TempDir tier_dir;
  auto probe = DecodedTier::Open((tier_dir.path() / "probe").string(), 0).ValueOrDie();
  probe->impl()->Store("k", {Int64Column(0, 100)}, 100);
  const int64_t one = probe->stats().bytes_on_disk;
  auto tier = DecodedTier::Open((tier_dir.path() / "t").string(), one).ValueOrDie();
  ASSERT_TRUE(tier->impl()->Store("first", {Int64Column(0, 100)}, 100).has_value());
  int calls = 0;
  auto no_room = [&] { ++calls; };
  EXPECT_FALSE(tier->impl()->Store("second", {Int64Column(0, 100)}, 100, nullptr, no_room));
  EXPECT_EQ(calls, 1);
  auto room = [&] {
    ++calls;
    std::filesystem::remove(tier->impl()->PathOf("first"));
    tier->impl()->usage_->Release(one);
  };
  EXPECT_TRUE(tier->impl()->Store("second", {Int64Column(0, 100)}, 100, nullptr, room));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(tier->stats().skipped, 1);  // the refused store only
}

}  // namespace
}  // namespace shardfeed
