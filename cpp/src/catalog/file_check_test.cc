#include "catalog/file_check.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>

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

}  // namespace
}  // namespace shardfeed
