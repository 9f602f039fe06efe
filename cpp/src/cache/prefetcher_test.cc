#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cache/cache_test_util.h"
#include "cache/entry.h"
#include "shardfeed/cache.h"

namespace shardfeed {
namespace {

namespace fs = std::filesystem;
using testing::FakeRemote;
using testing::RandomBytes;
using testing::ReadAll;
using testing::TempDir;

std::shared_ptr<FileCache> OpenCache(const fs::path& dir, int64_t limit = 0,
                                     double retry_base = 0.001) {
  CacheOptions options;
  options.dir = dir.string();
  options.limit_bytes = limit;
  options.retry_base_seconds = retry_base;
  return FileCache::Open(options).ValueOrDie();
}

bool Cached(const fs::path& dir, const RemoteFileInfo& file) {
  return fs::exists(dir / (cache_internal::EntryName(file.key) + ".data"));
}

std::vector<RemoteFileInfo> PutFiles(FakeRemote& remote, int n, size_t size) {
  std::vector<RemoteFileInfo> files;
  for (int i = 0; i < n; ++i) {
    files.push_back(remote.Put("f" + std::to_string(i), RandomBytes(size, 300 + i)));
  }
  return files;
}

TEST(Prefetcher, StaysWithinBytesAheadOfTheConsumer) {
  FakeRemote remote;
  TempDir dir;
  auto files = PutFiles(remote, 10, 10000);
  auto cache = OpenCache(dir.path());
  Prefetcher prefetcher(cache, remote.fs(), files, 25000);
  ASSERT_TRUE(prefetcher.WaitUntilIdle(30));
  // The file in use, then two more (20000 bytes <= 25000; a third would be 30000).
  EXPECT_EQ(prefetcher.done(), 3u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Cached(dir.path(), files[i]), i < 3) << i;

  prefetcher.Advance(5);  // files 3 and 4 were read without the prefetcher
  ASSERT_TRUE(prefetcher.WaitUntilIdle(30));
  EXPECT_EQ(prefetcher.done(), 8u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Cached(dir.path(), files[i]), i < 3 || (i >= 5 && i < 8));

  const int64_t before = cache->stats().remote_bytes;
  EXPECT_EQ(before, 6 * 10000);
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), files[6]).ValueOrDie()), RandomBytes(10000, 306));
  EXPECT_EQ(cache->stats().remote_bytes, before);
  EXPECT_EQ(cache->stats().cache_hits, 1);
  EXPECT_TRUE(prefetcher.first_error().ok());
}

TEST(Prefetcher, DoesNotEvictWhatTheConsumerNeedsSooner) {
  FakeRemote remote;
  TempDir dir;
  auto files = PutFiles(remote, 6, 10000);
  auto cache = OpenCache(dir.path(), 35000);  // room for three
  Prefetcher prefetcher(cache, remote.fs(), files, 1 << 30);
  cache->SetPriority(prefetcher.NextUse());
  ASSERT_TRUE(prefetcher.WaitUntilIdle(30));
  EXPECT_EQ(prefetcher.done(), 3u);  // file 3 would push out 0, 1 or 2, all needed before it
  EXPECT_EQ(cache->stats().evictions, 0);

  // The consumer holds file 1 (pinned) and has passed file 0.
  auto in_use = cache->OpenFile(remote.fs(), files[1]).ValueOrDie();
  prefetcher.Advance(1);
  ASSERT_TRUE(prefetcher.WaitUntilIdle(30));
  EXPECT_EQ(prefetcher.done(), 4u);  // 0 made room for 3; 4 would push out 2 or 3
  EXPECT_FALSE(Cached(dir.path(), files[0]));
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(Cached(dir.path(), files[i])) << i;
  EXPECT_LE(testing::FolderBytes(dir.path()), 35000);
  EXPECT_EQ(ReadAll(*in_use), RandomBytes(10000, 301));
}

TEST(Prefetcher, ConsumerWaitsForTheDownloadInProgressInsteadOfRepeatingIt) {
  FakeRemote remote;
  TempDir dir;
  auto files = PutFiles(remote, 1, 300000);
  auto slow = std::make_shared<testing::HookedFileSystem>();
  std::promise<void> started;
  std::atomic<bool> first{true};
  slow->on_read = [&] {
    if (first.exchange(false)) started.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  auto cache = OpenCache(dir.path());
  Prefetcher prefetcher(cache, slow, files, 0);
  started.get_future().wait();  // the prefetcher is downloading file 0
  auto f = cache->OpenFile(slow, files[0]).ValueOrDie();
  EXPECT_EQ(ReadAll(*f), RandomBytes(300000, 300));
  const auto s = cache->stats();
  EXPECT_EQ(s.remote_bytes, 300000);  // once
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_GT(s.prefetch_wait_seconds, 0.05);
  EXPECT_GT(s.fetch_seconds, 0.2);
}

TEST(Prefetcher, StopInterruptsABackoffPromptly) {
  FakeRemote remote;
  TempDir dir;
  auto files = PutFiles(remote, 2, 1000);
  auto flaky = std::make_shared<testing::HookedFileSystem>();
  std::promise<void> failed;
  std::atomic<bool> first{true};
  flaky->on_open = [&] {
    if (first.exchange(false)) failed.set_value();
    return arrow::Status::IOError("connection reset");
  };
  auto cache = OpenCache(dir.path(), 0, /*retry_base=*/30.0);  // a long backoff
  auto prefetcher = std::make_unique<Prefetcher>(cache, flaky, files, 1 << 20);
  failed.get_future().wait();
  const auto start = std::chrono::steady_clock::now();
  prefetcher.reset();  // the destructor stops and joins
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(Cached(dir.path(), files[0]));
}

TEST(Prefetcher, RecordsErrorsAndGoesOn) {
  FakeRemote remote;
  TempDir dir;
  auto files = PutFiles(remote, 3, 1000);
  files[1].path += ".missing";
  auto cache = OpenCache(dir.path());
  Prefetcher prefetcher(cache, remote.fs(), files, 1 << 20);
  ASSERT_TRUE(prefetcher.WaitUntilIdle(30));
  EXPECT_EQ(prefetcher.done(), 3u);
  EXPECT_FALSE(prefetcher.first_error().ok());
  EXPECT_NE(prefetcher.first_error().message().find(files[1].path), std::string::npos);
  EXPECT_TRUE(Cached(dir.path(), files[2]));
  // The consumer meets the error itself, at that file.
  EXPECT_FALSE(cache->OpenFile(remote.fs(), files[1]).ok());
}

}  // namespace
}  // namespace shardfeed
