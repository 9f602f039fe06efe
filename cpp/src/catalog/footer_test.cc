#include "catalog/footer.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

std::shared_ptr<parquet::FileMetaData> Footer(const std::filesystem::path& path) {
  return parquet::ParquetFileReader::OpenFile(path.string())->metadata();
}

TEST(ValidateFooter, AcceptsWhatArrowWrites) {
  TempDir dir;
  const auto path = dir.path() / "a.parquet";
  WriteIdFile(path, 0, 100, 30);
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
  EXPECT_TRUE(ValidateFooter(*Footer(path), size, "a.parquet").ok());
}

TEST(ValidateFooter, ChunksOutsideTheFileNameTheRowGroupAndColumn) {
  TempDir dir;
  const auto path = dir.path() / "a.parquet";
  WriteIdFile(path, 0, 100, 30);
  const auto footer = Footer(path);
  // The same footer against a file cut short after its first row group.
  const int64_t size = footer->RowGroup(1)->ColumnChunk(0)->data_page_offset();
  const auto st = ValidateFooter(*footer, size, "a.parquet");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(KindOf(st), ErrorKind::kInvalidData);
  EXPECT_NE(st.message().find("file 'a.parquet', row group 1, column 'id'"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace shardfeed
