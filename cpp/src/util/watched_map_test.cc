#include "util/watched_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <arrow/io/file.h>
#include <gtest/gtest.h>

#include "util/test_util.h"

namespace shardfeed {
namespace {

constexpr int64_t kPage = 4096;

// A file of `pages` pages, byte i of page p = p + 1, mapped whole.
std::shared_ptr<arrow::Buffer> MapFile(const std::filesystem::path& path, int pages) {
  std::string bytes;
  for (int p = 0; p < pages; ++p) bytes += std::string(kPage, static_cast<char>(p + 1));
  testing::WriteText(path, bytes);
  auto file = arrow::io::MemoryMappedFile::Open(path.string(), arrow::io::FileMode::READ);
  EXPECT_TRUE(file.ok()) << file.status();
  auto all = (*file)->ReadAt(0, static_cast<int64_t>(bytes.size()));
  EXPECT_TRUE(all.ok()) << all.status();
  return *all;
}

uint8_t ReadByte(const std::shared_ptr<arrow::Buffer>& buffer, int64_t at) {
  return static_cast<const volatile uint8_t*>(buffer->data())[at];
}

TEST(WatchedMap, ATruncatedFileReadsZerosAndIsFlagged) {
  testing::TempDir dir;
  const auto path = dir.path() / "entry";
  const int before = WatchedCountForTesting();
  {
    DamageFlag flag;
    auto watched = WatchMapped(MapFile(path, 4), &flag);
    ASSERT_TRUE(flag);
    EXPECT_EQ(WatchedCountForTesting(), before + 1);
    auto slice = arrow::SliceBuffer(watched, 2 * kPage, kPage);
    EXPECT_EQ(DamageFlagOf(slice), flag);
    EXPECT_EQ(ReadByte(watched, 1 * kPage + 5), 2);
    EXPECT_FALSE(flag->load());
    std::filesystem::resize_file(path, kPage + 10);  // pages 2 and 3 gone
    // Still backed: what was there.
    EXPECT_EQ(ReadByte(watched, 3), 1);
    EXPECT_FALSE(flag->load());
    // Past the end: zeros instead of SIGBUS, and the flag says so.
    EXPECT_EQ(ReadByte(slice, 7), 0);
    EXPECT_TRUE(flag->load());
    EXPECT_EQ(ReadByte(watched, 4 * kPage - 1), 0);
  }
  EXPECT_EQ(WatchedCountForTesting(), before);
}

TEST(WatchedMap, ManyThreadsFaultingAtOnceAllGetZeros) {
  testing::TempDir dir;
  std::vector<std::shared_ptr<arrow::Buffer>> buffers;
  std::vector<DamageFlag> flags(8);
  for (int k = 0; k < 8; ++k) {
    buffers.push_back(WatchMapped(MapFile(dir.path() / std::to_string(k), 16), &flags[k]));
  }
  for (int k = 0; k < 8; ++k) std::filesystem::resize_file(dir.path() / std::to_string(k), 0);
  std::vector<std::thread> threads;
  std::vector<int> sums(8, -1);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      int sum = 0;
      for (int64_t at = 0; at < 16 * kPage; at += 512) sum += ReadByte(buffers[k], at);
      sums[k] = sum;
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(sums[k], 0);
    EXPECT_TRUE(flags[k]->load());
  }
}

TEST(WatchedMap, OtherBuffersHaveNoFlag) {
  auto plain = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>("abc"), 3);
  EXPECT_EQ(DamageFlagOf(plain), nullptr);
  EXPECT_EQ(DamageFlagOf(nullptr), nullptr);
  DamageFlag flag;
  auto empty = std::make_shared<arrow::Buffer>(nullptr, 0);
  EXPECT_EQ(WatchMapped(empty, &flag), empty);
  EXPECT_EQ(flag, nullptr);
}

// A mapping of the whole file at `path` (plain mmap: no Arrow in a forked child).
std::shared_ptr<arrow::Buffer> MapPlain(const std::filesystem::path& path, int64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  return std::make_shared<arrow::Buffer>(static_cast<const uint8_t*>(p), size);  // never unmapped
}

void ExitThree(int) { ::_exit(3); }  // as PyTorch's DataLoader worker handler ends it
void ReturnAtOnce(int) {}            // a handler that fixes nothing

// Forks; the child installs `handler` for SIGBUS (as a DataLoader worker
// installs PyTorch's), then runs `body`, whose return value is its exit code.
int ForkAndWait(void (*handler)(int), const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, nullptr);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(WatchedMap, AChildThatInstalledAHandlerSinceForkIsWatchedToo) {
  testing::TempDir dir;
  DamageFlag parent_flag;
  auto installed = WatchMapped(MapFile(dir.path() / "parent", 1), &parent_flag);
  const auto path = dir.path() / "child";
  MapFile(path, 4);
  std::filesystem::resize_file(path, kPage);
  const int status = ForkAndWait(ExitThree, [&] {
    DamageFlag flag;
    auto watched = WatchMapped(MapPlain(path, 4 * kPage), &flag);
    if (ReadByte(watched, 3) != 1) return 10;
    if (ReadByte(watched, 2 * kPage) != 0) return 11;  // zeros, not ExitThree
    return flag->load() ? 0 : 12;
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(WatchedMap, AHandlerBeforeOursThatFixesNothingEndsTheProcessNotALoop) {
  testing::TempDir dir;
  const auto watched_path = dir.path() / "watched";
  const auto plain_path = dir.path() / "plain";
  MapFile(watched_path, 1);
  MapFile(plain_path, 2);
  std::filesystem::resize_file(plain_path, 0);
  const int status = ForkAndWait(ReturnAtOnce, [&] {
    DamageFlag flag;
    auto watched = WatchMapped(MapPlain(watched_path, kPage), &flag);  // ours over ReturnAtOnce
    auto plain = MapPlain(plain_path, 2 * kPage);
    return static_cast<int>(ReadByte(plain, kPage + 1)) + 20;  // never returns
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

TEST(WatchedMapDeathTest, ASigbusElsewhereStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::TempDir dir;
  const auto path = dir.path() / "plain";
  // Installs the handler, which must pass on what is not its own.
  DamageFlag flag;
  auto watched = WatchMapped(MapFile(dir.path() / "watched", 1), &flag);
  auto unwatched = MapFile(path, 2);
  std::filesystem::resize_file(path, 0);
  EXPECT_DEATH(ReadByte(unwatched, kPage + 1), "");
  EXPECT_DEATH(::raise(SIGBUS), "");
  EXPECT_FALSE(flag->load());
}

}  // namespace
}  // namespace shardfeed
