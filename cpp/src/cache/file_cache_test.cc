#include "shardfeed/cache.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cache/cache_test_util.h"
#include "cache/entry.h"
#include "cache/file_cache.h"
#include "shardfeed/status.h"

extern char** environ;

namespace shardfeed {
namespace {

namespace fs = std::filesystem;
using testing::FakeRemote;
using testing::FolderBytes;
using testing::RandomBytes;
using testing::ReadAll;
using testing::TempDir;

std::shared_ptr<FileCache> OpenCache(const fs::path& dir, int64_t limit = 0,
                                     double remote_timeout = CacheOptions{}.remote_timeout) {
  CacheOptions options;
  options.dir = dir.string();
  options.limit_bytes = limit;
  options.retry_base_seconds = 0.001;
  options.remote_timeout = remote_timeout;
  auto cache = FileCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return *cache;
}

fs::path DataPath(const fs::path& dir, const RemoteFileInfo& file) {
  return dir / (cache_internal::EntryName(file.key) + ".data");
}

TEST(FileCache, MissThenHitReadsRemoteOnce) {
  FakeRemote remote;
  TempDir tmp;
  const fs::path dir = tmp.path() / "a" / "cache";
  const std::string bytes = RandomBytes(100000, 1);
  auto file = remote.Put("part-0.parquet", bytes);
  auto cache = OpenCache(dir);

  EXPECT_EQ((fs::status(dir).permissions() & fs::perms::all), fs::perms::owner_all);
  {
    auto f = cache->OpenFile(remote.fs(), file).ValueOrDie();
    EXPECT_EQ(ReadAll(*f), bytes);
  }
  auto s = cache->stats();
  EXPECT_EQ(s.cache_misses, 1);
  EXPECT_EQ(s.cache_hits, 0);
  EXPECT_EQ(s.remote_bytes, 100000);
  EXPECT_EQ(fs::file_size(DataPath(dir, file)), 100000u);

  auto f = cache->OpenFile(remote.fs(), file).ValueOrDie();
  EXPECT_EQ(ReadAll(*f), bytes);
  s = cache->stats();
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.remote_bytes, 100000);  // the hit read nothing remote
  EXPECT_EQ(s.uncached_reads, 0);
  EXPECT_EQ(s.cache_bytes, 100000);

  // A second run on the node starts warm.
  auto again = OpenCache(dir);
  EXPECT_EQ(ReadAll(*again->OpenFile(remote.fs(), file).ValueOrDie()), bytes);
  EXPECT_EQ(again->stats().remote_bytes, 0);
  EXPECT_EQ(again->Usage().ValueOrDie().entries, 1);
}

TEST(FileCache, EmptyFile) {
  FakeRemote remote;
  TempDir dir;
  auto file = remote.Put("empty.parquet", "");
  auto cache = OpenCache(dir.path());
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), file).ValueOrDie()), "");
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), file).ValueOrDie()), "");
  EXPECT_EQ(cache->stats().cache_hits, 1);
}

TEST(FileCache, TwoCachesRacingDownloadEachFileOnce) {
  FakeRemote remote;
  TempDir dir;
  std::vector<RemoteFileInfo> files;
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(RandomBytes(200000 + i, 10 + i));
    files.push_back(remote.Put("f" + std::to_string(i), contents.back()));
  }
  // Two FileCache objects stand for two processes (flock makes no difference
  // between two open file descriptions of one process and of two).
  auto a = OpenCache(dir.path());
  auto b = OpenCache(dir.path());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto& cache = (t % 2) ? a : b;
      for (int k = 0; k < 4; ++k) {
        const int i = (k + t) % 4;
        auto f = cache->OpenFile(remote.fs(), files[i]);
        if (!f.ok() || ReadAll(**f) != contents[i]) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  int64_t total = 0;
  for (const auto& f : files) total += f.size;
  EXPECT_EQ(a->stats().remote_bytes + b->stats().remote_bytes, total);
  EXPECT_EQ(a->stats().cache_misses + b->stats().cache_misses, 4);
  EXPECT_EQ(a->stats().cache_hits + b->stats().cache_hits, 28);
}

// The child side of TwoProcessesDownloadEachFileOnce: runs only when spawned.
TEST(FileCacheChild, DISABLED_OpenAll) {
  const char* cache_dir = std::getenv("SHARDFEED_TEST_CACHE_DIR");
  const char* remote_dir = std::getenv("SHARDFEED_TEST_REMOTE_DIR");
  const char* out = std::getenv("SHARDFEED_TEST_OUT");
  ASSERT_TRUE(cache_dir && remote_dir && out);
  auto cache = OpenCache(cache_dir);
  auto fs = std::make_shared<arrow::fs::LocalFileSystem>();
  for (int i = 0; i < 4; ++i) {
    const std::string path = std::string(remote_dir) + "/f" + std::to_string(i);
    RemoteFileInfo file{"local://" + path, path, static_cast<int64_t>(fs::file_size(path)), ""};
    auto f = cache->OpenFile(fs, file).ValueOrDie();
    ASSERT_EQ(ReadAll(*f), RandomBytes(static_cast<size_t>(file.size), 20 + i));
  }
  std::ofstream(out) << cache->stats().remote_bytes;
}

TEST(FileCacheProcesses, TwoProcessesDownloadEachFileOnce) {
  FakeRemote remote;
  TempDir dir, outs;
  int64_t total = 0;
  for (int i = 0; i < 4; ++i)
    total += remote.Put("f" + std::to_string(i), RandomBytes(300000, 20 + i)).size;
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    std::vector<std::string> env = {
        "SHARDFEED_TEST_CACHE_DIR=" + dir.path().string(),
        "SHARDFEED_TEST_REMOTE_DIR=" + remote.PathOf("f0").parent_path().string(),
        "SHARDFEED_TEST_OUT=" + (outs.path() / std::to_string(c)).string()};
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::string filter = "--gtest_filter=FileCacheChild.DISABLED_OpenAll";
    std::string disabled = "--gtest_also_run_disabled_tests";
    char* argv[] = {self.data(), filter.data(), disabled.data(), nullptr};
    posix_spawn_file_actions_t quiet;  // the child's gtest banner would interleave with ours
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    const int rc = posix_spawn(&pid, self.c_str(), &quiet, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&quiet);
    ASSERT_EQ(rc, 0);
    children.push_back(pid);
  }
  int64_t remote_bytes = 0;
  for (size_t c = 0; c < children.size(); ++c) {
    int status = 0;
    ASSERT_EQ(waitpid(children[c], &status, 0), children[c]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << c;
    int64_t bytes = -1;
    std::ifstream(outs.path() / std::to_string(c)) >> bytes;
    ASSERT_GE(bytes, 0);
    remote_bytes += bytes;
  }
  EXPECT_EQ(remote_bytes, total);  // each file crossed the network once
}

TEST(FileCache, OverwrittenRemoteFileIsFetchedAgain) {
  FakeRemote remote;
  TempDir dir;
  auto cache = OpenCache(dir.path());
  auto v1 = remote.Put("f", RandomBytes(5000, 1));
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), v1).ValueOrDie()), RandomBytes(5000, 1));

  // New size and mtime.
  auto v2 = remote.Put("f", RandomBytes(7000, 2));
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), v2).ValueOrDie()), RandomBytes(7000, 2));
  EXPECT_EQ(cache->stats().cache_misses, 2);

  // Same size, new version: the size alone does not make an entry valid.
  // (The file's own modification time with a suffix: never v2's version
  // string, even when both writes share a clock tick, and still the time the
  // file has when the cache checks it; v2's time with a suffix failed when
  // the second turned between the two writes.)
  auto v3 = remote.Put("f", RandomBytes(7000, 3));
  v3.version += "-3";
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), v3).ValueOrDie()), RandomBytes(7000, 3));
  EXPECT_EQ(cache->stats().cache_misses, 3);
  EXPECT_EQ(cache->stats().remote_bytes, 5000 + 7000 + 7000);
  EXPECT_EQ(cache->Usage().ValueOrDie().entries, 1);  // replaced, not added
}

TEST(FileCache, PinnedOldVersionStaysReadableWhileReplaced) {
  FakeRemote remote;
  TempDir dir;
  auto cache = OpenCache(dir.path());
  auto v1 = remote.Put("f", RandomBytes(5000, 1));
  auto old_file = cache->OpenFile(remote.fs(), v1).ValueOrDie();
  auto v2 = remote.Put("f", RandomBytes(6000, 2));
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), v2).ValueOrDie()), RandomBytes(6000, 2));
  EXPECT_EQ(ReadAll(*old_file), RandomBytes(5000, 1));
}

TEST(FileCache, TruncatedEntryIsFetchedAgain) {
  FakeRemote remote;
  TempDir dir;
  const std::string bytes = RandomBytes(50000, 4);
  auto file = remote.Put("f", bytes);
  auto cache = OpenCache(dir.path());
  ASSERT_TRUE(cache->OpenFile(remote.fs(), file).ok());
  fs::resize_file(DataPath(dir.path(), file), 20000);
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), file).ValueOrDie()), bytes);
  EXPECT_EQ(cache->stats().cache_misses, 2);
  EXPECT_EQ(fs::file_size(DataPath(dir.path(), file)), 50000u);
}

TEST(FileCache, CorruptedEntryIsFetchedAgain) {
  FakeRemote remote;
  TempDir dir;
  const std::string bytes = RandomBytes(50000, 5);
  auto file = remote.Put("f", bytes);
  ASSERT_TRUE(OpenCache(dir.path())->OpenFile(remote.fs(), file).ok());
  {
    // Same size, one byte flipped: only the checksum can tell.
    std::fstream f(DataPath(dir.path(), file), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12345);
    f.put(static_cast<char>(~bytes[12345]));
  }
  auto next_process = OpenCache(dir.path());
  EXPECT_EQ(ReadAll(*next_process->OpenFile(remote.fs(), file).ValueOrDie()), bytes);
  EXPECT_EQ(next_process->stats().cache_misses, 1);
  EXPECT_EQ(next_process->stats().remote_bytes, 50000);
  // Damaged metadata is a miss too.
  std::ofstream(DataPath(dir.path(), file).replace_extension(".meta")) << "key=x\nsize=1\n";
  auto third = OpenCache(dir.path());
  EXPECT_EQ(ReadAll(*third->OpenFile(remote.fs(), file).ValueOrDie()), bytes);
  EXPECT_EQ(third->stats().cache_misses, 1);
}

TEST(FileCache, LeftoverTempFilesAreNeverServedAndAreRemoved) {
  FakeRemote remote;
  TempDir dir;
  const std::string bytes = RandomBytes(30000, 6);
  auto file = remote.Put("f", bytes);
  const std::string name = cache_internal::EntryName(file.key);
  // What a process killed mid-download leaves: unlocked temp files, one of
  // them full-size with the wrong bytes.
  const fs::path temp = dir.path() / (".tmp-" + name + "-999999-0-0123456789abcdef.data");
  std::ofstream(temp) << RandomBytes(30000, 99);
  std::ofstream(dir.path() / (".tmp-" + name + "-999999-0-0123456789abcdef.meta")) << "partial";
  // ... and data whose metadata never made it (killed between the renames).
  std::ofstream(DataPath(dir.path(), file)) << RandomBytes(30000, 98);

  auto cache = OpenCache(dir.path());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), file).ValueOrDie()), bytes);
  EXPECT_EQ(cache->stats().cache_misses, 1);
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
  }
}

TEST(FileCache, FolderThatIsAFileIsAClearError) {
  TempDir dir;
  testing::WriteText(dir.path() / "not-a-folder", "x");
  CacheOptions options;
  options.dir = (dir.path() / "not-a-folder").string();
  auto cache = FileCache::Open(options);
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(KindOf(cache.status()), ErrorKind::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("not-a-folder"), std::string::npos);
  EXPECT_NE(cache.status().message().find("not a directory"), std::string::npos);
}

TEST(FileCache, NeverAboveTheLimitAndEvictsFarthestNextUse) {
  FakeRemote remote;
  TempDir dir;
  constexpr int kFiles = 10;
  constexpr int64_t kSize = 10000;
  std::vector<RemoteFileInfo> files;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back(remote.Put("f" + std::to_string(i), RandomBytes(kSize, 100 + i)));
  }
  constexpr int64_t kLimit = 3 * kSize + kSize / 2;  // room for three
  auto cache = OpenCache(dir.path(), kLimit);
  // Next use: file i is needed at step next_use[i].
  std::map<std::string, int64_t> next_use = {
      {files[0].key, 100}, {files[1].key, 5}, {files[2].key, 50}};
  cache->SetPriority([&next_use](const std::string& key) {
    auto it = next_use.find(key);
    return it == next_use.end() ? INT64_MAX : it->second;
  });
  auto pinned = cache->OpenFile(remote.fs(), files[0]).ValueOrDie();  // farthest, but in use
  ASSERT_TRUE(cache->OpenFile(remote.fs(), files[1]).ok());
  ASSERT_TRUE(cache->OpenFile(remote.fs(), files[2]).ok());
  EXPECT_EQ(cache->stats().evictions, 0);
  ASSERT_TRUE(cache->OpenFile(remote.fs(), files[3]).ok());
  EXPECT_EQ(cache->stats().evictions, 1);
  EXPECT_TRUE(fs::exists(DataPath(dir.path(), files[0])));   // pinned
  EXPECT_TRUE(fs::exists(DataPath(dir.path(), files[1])));   // needed soonest
  EXPECT_FALSE(fs::exists(DataPath(dir.path(), files[2])));  // farthest unpinned
  EXPECT_LE(FolderBytes(dir.path()), kLimit);
  EXPECT_EQ(ReadAll(*pinned), RandomBytes(kSize, 100));

  // A stream of files: the folder never exceeds the limit, the bytes are right.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kFiles; ++i) {
      auto f = cache->OpenFile(remote.fs(), files[i]).ValueOrDie();
      EXPECT_EQ(ReadAll(*f), RandomBytes(kSize, 100 + i));
      EXPECT_LE(FolderBytes(dir.path()), kLimit);
    }
  }
  EXPECT_TRUE(fs::exists(DataPath(dir.path(), files[0])));  // still pinned, still there
  EXPECT_EQ(cache->stats().uncached_reads, 0);
}

TEST(FileCache, EverythingPinnedMeansUncachedReads) {
  FakeRemote remote;
  TempDir dir;
  auto a = remote.Put("a", RandomBytes(10000, 1));
  auto b = remote.Put("b", RandomBytes(10000, 2));
  auto big = remote.Put("big", RandomBytes(30000, 3));
  auto cache = OpenCache(dir.path(), 15000);
  auto pinned = cache->OpenFile(remote.fs(), a).ValueOrDie();
  auto fb = cache->OpenFile(remote.fs(), b).ValueOrDie();
  EXPECT_EQ(ReadAll(*fb), RandomBytes(10000, 2));
  EXPECT_EQ(cache->stats().uncached_reads, 1);
  EXPECT_EQ(ReadAll(*cache->OpenFile(remote.fs(), big).ValueOrDie()), RandomBytes(30000, 3));
  EXPECT_EQ(cache->stats().uncached_reads, 2);  // larger than the limit
  EXPECT_LE(FolderBytes(dir.path()), 15000);
  EXPECT_EQ(cache->stats().remote_bytes, 10000 + 10000 + 30000);
}

TEST(FileCache, NothingIsEvictedWhenEverythingFits) {
  FakeRemote remote;
  TempDir dir;
  std::vector<RemoteFileInfo> files;
  for (int i = 0; i < 5; ++i) files.push_back(remote.Put(std::to_string(i), RandomBytes(1000, i)));
  auto cache = OpenCache(dir.path(), 5000);
  for (int round = 0; round < 3; ++round) {
    for (const auto& f : files) ASSERT_TRUE(cache->OpenFile(remote.fs(), f).ok());
  }
  EXPECT_EQ(cache->stats().evictions, 0);
  EXPECT_EQ(cache->stats().remote_bytes, 5000);
  EXPECT_EQ(cache->stats().cache_hits, 10);
}

TEST(FileCache, OpeningWithALowerLimitEvictsDownToIt) {
  FakeRemote remote;
  TempDir dir;
  {
    auto cache = OpenCache(dir.path());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(
          cache->OpenFile(remote.fs(), remote.Put(std::to_string(i), RandomBytes(1000, i))).ok());
    }
  }
  auto cache = OpenCache(dir.path(), 2500);
  EXPECT_LE(FolderBytes(dir.path()), 2500);
  EXPECT_EQ(cache->Usage().ValueOrDie().entries, 2);
  EXPECT_EQ(cache->Clear().ValueOrDie(), 2000);
  EXPECT_EQ(FolderBytes(dir.path()), 0);
}

TEST(FileCache, RemoteFailuresAreRetriedThenNamed) {
  TempDir dir, remote_dir;
  auto hooked = std::make_shared<testing::HookedFileSystem>();
  const std::string path = (remote_dir.path() / "f").string();
  testing::WriteText(path, "0123456789");
  RemoteFileInfo file{"s3://bucket/f", path, 10, ""};
  int failures = 2;
  hooked->on_open = [&] {
    return failures-- > 0 ? arrow::Status::IOError("AWS Error SLOW_DOWN (HTTP 503)")
                          : arrow::Status::OK();
  };
  auto cache = OpenCache(dir.path());
  EXPECT_EQ(ReadAll(*cache->OpenFile(hooked, file).ValueOrDie()), "0123456789");
  EXPECT_EQ(hooked->opens.load(), 3);

  // Always failing: retried until remote_timeout, then an error naming the file;
  // without a remote_timeout, 1 + max_retries attempts.
  RemoteFileInfo other{"s3://bucket/g", path, 10, ""};
  hooked->on_open = [] { return arrow::Status::IOError("AWS Error SLOW_DOWN (HTTP 503)"); };
  for (const double timeout : {0.0, 0.4}) {
    TempDir fresh;
    auto bounded = OpenCache(fresh.path(), 0, timeout);
    hooked->opens = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto failed = bounded->OpenFile(hooked, other);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(failed.ok());
    if (timeout == 0) {
      EXPECT_EQ(hooked->opens.load(), 6);
    } else {  // (not 1 + max_retries: the deadline bounds the retries)
      EXPECT_GT(hooked->opens.load(), 6);
      EXPECT_GE(took, 0.3);
      EXPECT_LT(took, 5.0);
    }
    EXPECT_EQ(KindOf(failed.status()), ErrorKind::kStorage);
    EXPECT_NE(failed.status().message().find(path), std::string::npos);
    EXPECT_NE(failed.status().message().find("SLOW_DOWN"), std::string::npos)
        << failed.status().message();
  }

  // A missing key is not retried.
  hooked->opens = 0;
  hooked->on_open = [] { return arrow::Status::IOError("AWS Error NO_SUCH_KEY"); };
  EXPECT_FALSE(cache->OpenFile(hooked, other).ok());
  EXPECT_EQ(hooked->opens.load(), 1);
  EXPECT_EQ(cache->Usage().ValueOrDie().bytes, 10);  // no temp left behind
}

TEST(FileCache, FullDiskDegradesToUncachedReadsWithOneWarning) {
  FakeRemote remote;
  TempDir dir;
  auto a = remote.Put("a", RandomBytes(64 << 10, 1));
  auto b = remote.Put("b", RandomBytes(64 << 10, 2));
  auto cache = OpenCache(dir.path());
  FileCache::Impl::warned_in_process() = false;  // as in a fresh process
  // Files may not grow past 4 KiB for a moment: the cache's writes fail as
  // they would on a full disk (EFBIG here, ENOSPC there).
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit low = old_limit;
  low.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  ::testing::internal::CaptureStderr();
  auto fa = cache->OpenFile(remote.fs(), a);
  auto fb = cache->OpenFile(remote.fs(), b);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  EXPECT_EQ(ReadAll(**fa), RandomBytes(64 << 10, 1));
  EXPECT_EQ(ReadAll(**fb), RandomBytes(64 << 10, 2));
  EXPECT_EQ(cache->stats().uncached_reads, 2);
  const std::string warning = "cannot write to the cache folder";
  const size_t first = err.find(warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << err;  // once
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
  }
}

}  // namespace
}  // namespace shardfeed

namespace shardfeed {
namespace {

TEST(FileCache, AFileThatGotNoAnswerFailsAtOnceForRemoteTimeout) {
  // The consumer that waited for a prefetch's fill lock used to wait out a
  // second remote_timeout on a store that had just not answered for one.
  TempDir dir, remote_dir;
  auto hooked = std::make_shared<testing::HookedFileSystem>();
  const std::string path = (remote_dir.path() / "f").string();
  testing::WriteText(path, "0123456789");
  RemoteFileInfo file{"s3://bucket/f", path, 10, ""};
  auto stall = std::make_shared<std::atomic<bool>>(true);
  hooked->on_read = [stall] {  // a store that stops answering (reads left behind end later)
    while (stall->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  CacheOptions options;
  options.dir = dir.path().string();
  options.retry_base_seconds = 0.001;
  options.remote_timeout = 1.0;
  auto cache = FileCache::Open(options).ValueOrDie();
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  auto t0 = Clock::now();
  auto first = cache->OpenFile(hooked, file);
  ASSERT_FALSE(first.ok());
  EXPECT_GE(seconds_since(t0), 1.0);
  EXPECT_NE(first.status().message().find("remote_timeout"), std::string::npos);
  t0 = Clock::now();
  auto second = cache->OpenFile(hooked, file);
  ASSERT_FALSE(second.ok());
  EXPECT_LT(seconds_since(t0), 0.5);  // at once (not remote_timeout again), the same error
  // ... said as remembered: no request was made this time.
  EXPECT_EQ(second.status().message().rfind(first.status().message(), 0), 0u);
  EXPECT_NE(second.status().message().find("not requested again"), std::string::npos)
      << second.status().message();
  // Once remote_timeout has passed, the store is asked again.
  stall->store(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  auto third = cache->OpenFile(hooked, file);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(ReadAll(**third), "0123456789");
}

TEST(FileCache, AFillerThatMakesNoEndIsWaitedForHalfRemoteTimeoutThenReadAround) {
  // Another process on the node holds an entry's fill lock and makes no end
  // (stopped with SIGSTOP, hung): its lock is held here by another open file
  // description, which flock treats as another owner.
  FakeRemote remote;
  TempDir tmp;
  const std::string bytes = RandomBytes(5000, 3);
  auto file = remote.Put("part-0.parquet", bytes);
  CacheOptions options;
  options.dir = tmp.path().string();
  options.retry_base_seconds = 0.001;
  options.remote_timeout = 0.5;
  auto cache = FileCache::Open(options).ValueOrDie();
  const std::string lock_path =
      (tmp.path() / (cache_internal::EntryName(file.key) + ".lock")).string();
  const int held = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  auto t0 = Clock::now();
  auto first = cache->OpenFile(remote.fs(), file);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(ReadAll(**first), bytes);  // read from the remote itself
  // Half of remote_timeout waited; the read of the store has the other half, so
  // that a failing store is said within remote_timeout, not twice it.
  EXPECT_GE(seconds_since(t0), 0.25);
  EXPECT_LT(seconds_since(t0), 0.5);
  t0 = Clock::now();
  auto second = cache->OpenFile(remote.fs(), file);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(ReadAll(**second), bytes);
  EXPECT_LT(seconds_since(t0), 0.4);  // not waited out again while it is held
  EXPECT_EQ(cache->stats().uncached_reads, 2);
  // The wait also ends when the loader stops.
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.store(true);
  });
  t0 = Clock::now();
  auto polled = storage_internal::OpenLockedWithin(
      lock_path, O_RDWR, storage_internal::LockMode::kExclusive, 0, [&] { return stop.load(); });
  stopper.join();
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(polled->outcome, storage_internal::LockOutcome::kBusy);
  EXPECT_LT(seconds_since(t0), 0.5);
  // Once the filler is gone, the entry is filled and served.
  ::close(held);
  auto third = cache->OpenFile(remote.fs(), file);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(ReadAll(**third), bytes);
  EXPECT_TRUE(fs::exists(DataPath(tmp.path(), file)));
}

TEST(FileCache, AFolderOrFifoInAnEntrysPlaceIsRemovedNotAnError) {
  // `cache clear` and every eviction failed on one ("is not a regular file").
  FakeRemote remote;
  TempDir tmp;
  const fs::path dir = tmp.path() / "cache";
  auto a = remote.Put("a.parquet", RandomBytes(3000, 4));
  auto b = remote.Put("b.parquet", RandomBytes(3000, 5));
  {
    auto cache = OpenCache(dir);
    ASSERT_TRUE(cache->OpenFile(remote.fs(), a).ok());
  }
  const fs::path data = DataPath(dir, a);
  fs::remove(data);
  fs::create_directories(data / "inside");
  const fs::path fifo = dir / (cache_internal::EntryName(b.key) + ".meta");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto cache = OpenCache(dir, 4000);  // a limit: the scan evicts
  EXPECT_FALSE(fs::exists(data));
  EXPECT_FALSE(fs::exists(fifo));
  auto f = cache->OpenFile(remote.fs(), b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(ReadAll(**f), RandomBytes(3000, 5));
  fs::create_directories(DataPath(dir, a));
  EXPECT_TRUE(cache->Clear().ok());
  EXPECT_FALSE(fs::exists(DataPath(dir, a)));
}

}  // namespace
}  // namespace shardfeed
