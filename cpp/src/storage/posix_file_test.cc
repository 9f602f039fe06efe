#include "storage/posix_file.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "util/test_util.h"

namespace shardfeed::storage_internal {
namespace {

TEST(CacheLock, SharedLocksCoexistExclusiveDoesNot) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "x.lock").string();
  auto a = OpenLocked(path, O_RDWR | O_CREAT, LockMode::kShared, LockWait::kNoWait).ValueOrDie();
  auto b = OpenLocked(path, O_RDWR | O_CREAT, LockMode::kShared, LockWait::kNoWait).ValueOrDie();
  EXPECT_EQ(a.outcome, LockOutcome::kLocked);
  EXPECT_EQ(b.outcome, LockOutcome::kLocked);
  // Another open file description of the same process conflicts like another process.
  auto c = OpenLocked(path, O_RDWR, LockMode::kExclusive, LockWait::kNoWait).ValueOrDie();
  EXPECT_EQ(c.outcome, LockOutcome::kBusy);
  a.fd.Reset();
  b.fd.Reset();
  auto d = OpenLocked(path, O_RDWR, LockMode::kExclusive, LockWait::kNoWait).ValueOrDie();
  EXPECT_EQ(d.outcome, LockOutcome::kLocked);
}

TEST(CacheLock, MissingFileWithoutCreate) {
  testing::TempDir dir;
  auto r = OpenLocked((dir.path() / "none").string(), O_RDONLY, LockMode::kShared, LockWait::kWait)
               .ValueOrDie();
  EXPECT_EQ(r.outcome, LockOutcome::kMissing);
  EXPECT_FALSE(r.fd.valid());
}

TEST(CacheLock, AWaiterOnAnUnlinkedFileStartsOver) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "x.lock").string();
  auto holder =
      OpenLocked(path, O_RDWR | O_CREAT, LockMode::kExclusive, LockWait::kWait).ValueOrDie();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto w = OpenLocked(path, O_RDWR | O_CREAT, LockMode::kExclusive, LockWait::kWait);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->outcome, LockOutcome::kLocked);
    struct stat locked, named;
    ASSERT_EQ(::fstat(w->fd.get(), &locked), 0);
    ASSERT_EQ(::stat(path.c_str(), &named), 0);
    EXPECT_EQ(locked.st_ino, named.st_ino);  // the file now at the path, not the removed one
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it block
  ASSERT_EQ(::unlink(path.c_str()), 0);  // an evictor removes the file it holds
  holder.fd.Reset();
  waiter.join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace shardfeed::storage_internal
