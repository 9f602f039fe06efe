#include "catalog/file_check.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <arrow/filesystem/mockfs.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

TEST(FileCheck, NoticesASameSizeRewriteWithTheOldMtime) {
  TempDir dir;
  const auto path = dir.path() / "a.parquet";
  WriteIdFile(path, 0, 40, 10);
  auto catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
  const auto& file = catalog->files()[0];
  ASSERT_TRUE(CheckUnchanged(*catalog->filesystem(), file).ok());

  struct stat before;
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  WriteIdFile(path, 1000, 40, 10);  // same size, other values
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);  // and the old mtime
  ASSERT_EQ(std::filesystem::file_size(path), static_cast<uintmax_t>(file.size));
  auto st = CheckUnchanged(*catalog->filesystem(), file);
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidData);
  EXPECT_NE(st.message().find("changed since the dataset was opened"), std::string::npos);

  std::filesystem::remove(path);
  EXPECT_NE(CheckUnchanged(*catalog->filesystem(), file).message().find("removed"),
            std::string::npos);
}

// A remote filesystem whose file information never comes until released, as
// a client retrying against a silent network.  Its GetFileInfoAsync is Arrow's
// default: the synchronous call on the caller's thread (as for GCS).
class SilentFileSystem final : public arrow::fs::internal::MockFileSystem {
 public:
  SilentFileSystem() : MockFileSystem(arrow::fs::TimePoint{}) {}
  using MockFileSystem::GetFileInfo;
  arrow::Result<arrow::fs::FileInfo> GetFileInfo(const std::string& path) override {
    std::unique_lock<std::mutex> lock(mu_);
    released_cv_.wait(lock, [&] { return released_; });
    return MockFileSystem::GetFileInfo(path);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    released_cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable released_cv_;
  bool released_ = false;
};

TEST(FileCheck, FileInformationGivesUpAtTheDeadlineWhateverTheFilesystem) {
  auto fs = std::make_shared<SilentFileSystem>();
  const auto t0 = std::chrono::steady_clock::now();
  auto info = FileInfoWithin(*fs, "bucket/a.parquet", 0.2);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(KindOf(info.status()), ErrorKind::kStorage);
  EXPECT_NE(info.status().message().find("within 0.2 s (remote_timeout)"), std::string::npos);
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);

  // A stop ends the wait too, with no deadline at all.
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop = true;
  });
  auto stopped = FileInfoWithin(*fs, "bucket/a.parquet", 0, [&] { return stop.load(); });
  stopper.join();
  EXPECT_TRUE(stopped.status().IsCancelled()) << stopped.status().ToString();

  // The abandoned calls own the filesystem and end on their own once it answers.
  fs->Release();
  std::weak_ptr<SilentFileSystem> weak = fs;
  fs.reset();
  for (int i = 0; i < 200 && !weak.expired(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace shardfeed
