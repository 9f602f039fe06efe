#include "catalog/listing.h"

#include <filesystem>

#include <arrow/filesystem/localfs.h>
#include <arrow/filesystem/mockfs.h>
#include <gtest/gtest.h>

#include "shardfeed/catalog.h"
#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

TEST(Listing, FollowsEachDirectoryOnce) {
  TempDir dir;
  WriteIdFile(dir.path() / "a.parquet", 0, 10, 10);
  WriteIdFile(dir.path() / "sub" / "b.parquet", 10, 10, 10);
  std::filesystem::create_directory_symlink(dir.path(), dir.path() / "loop");
  std::filesystem::create_directory_symlink(dir.path() / "sub", dir.path() / "sub" / "up");
  arrow::fs::LocalFileSystem fs;
  auto files = ListFiles(fs, dir.path().string(), "x", 0).ValueOrDie();
  ASSERT_EQ(files.size(), 2u);
  auto catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
  EXPECT_EQ(catalog->num_rows(), 20);
}

TEST(Listing, FollowsALinkToAnotherDirectory) {
  TempDir dir, other;
  WriteIdFile(dir.path() / "data" / "a.parquet", 0, 10, 10);
  WriteIdFile(other.path() / "b.parquet", 10, 10, 10);
  std::filesystem::create_directory_symlink(other.path(), dir.path() / "data" / "more");
  auto catalog = Catalog::Open({(dir.path() / "data").string()}).ValueOrDie();
  ASSERT_EQ(catalog->files().size(), 2u);
  EXPECT_EQ(catalog->files()[1].rel_path, "more/b.parquet");
}

TEST(Listing, RejectsDotComponentsInObjectKeys) {
  arrow::fs::internal::MockFileSystem fs(arrow::fs::TimePoint{});
  for (const char* key : {"bucket/x/../y.parquet", "bucket/./y.parquet", "bucket/x/.."}) {
    auto st = CheckObjectKey(fs, key, key);
    EXPECT_EQ(KindOf(st), ErrorKind::kInvalidArgument) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
  }
  EXPECT_TRUE(CheckObjectKey(fs, "bucket/x..y/.hidden/a.parquet", "k").ok());
  arrow::fs::LocalFileSystem local;
  EXPECT_TRUE(CheckObjectKey(local, "/a/../b.parquet", "k").ok());
}

}  // namespace
}  // namespace shardfeed
