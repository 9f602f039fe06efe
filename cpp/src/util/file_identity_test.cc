#include "util/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "util/test_util.h"

namespace shardfeed {
namespace {

TEST(StatIdentity, SameFileByAnyNameOrDescriptor) {
  testing::TempDir dir;
  const auto a = dir.path() / "a";
  const auto b = dir.path() / "b";
  testing::WriteText(a, "abc");
  std::filesystem::create_hard_link(a, b);
  const std::string id = StatIdentityAt(a.string());
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(StatIdentityAt(b.string()), id);
  const int fd = ::open(a.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(StatIdentityOf(fd), id);
  ::close(fd);
}

TEST(StatIdentity, MovesWithAWriteInPlaceWhateverTheModificationTime) {
  testing::TempDir dir;
  const auto a = dir.path() / "a";
  testing::WriteText(a, "abc");
  struct stat before {};
  ASSERT_EQ(::stat(a.c_str(), &before), 0);
  const std::string id = StatIdentity(before);
  // Same size, modification time set back: only the change time moves, and
  // it may need a clock tick to do so.
  std::string now = id;
  for (int i = 0; i < 2000 && now == id; ++i) {
    testing::WriteText(a, i % 2 ? "abc" : "xyz");
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, a.c_str(), times, 0), 0);
    if (i > 0) ::usleep(1000);
    now = StatIdentityAt(a.string());
  }
  EXPECT_NE(now, id);
}

TEST(StatIdentity, EmptyWhenTheFileCannotBeRead) {
  testing::TempDir dir;
  EXPECT_EQ(StatIdentityAt((dir.path() / "missing").string()), "");
  EXPECT_EQ(StatIdentityOf(-1), "");
}

}  // namespace
}  // namespace shardfeed
