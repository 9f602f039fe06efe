#include "catalog/table_formats.h"

#include <string>
#include <vector>

#include <arrow/filesystem/localfs.h>
#include <gtest/gtest.h>

namespace shardfeed {
namespace {

arrow::Status Check(const std::vector<std::string>& paths,
                    const std::vector<std::string>& delta_roots = {}) {
  std::vector<arrow::fs::FileInfo> listed;
  for (const auto& p : paths) listed.emplace_back(p, arrow::fs::FileType::File);
  arrow::fs::LocalFileSystem fs;
  return CheckTableFormats(fs, "/no/such/lake", listed, delta_roots, "lake", 0);
}

TEST(TableFormats, IcebergAndHudiFoldersWithDataAreRefusedByName) {
  auto st = Check({"/no/such/lake/t/metadata/v3.metadata.json", "/no/such/lake/t/data/a.parquet"});
  ASSERT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("'lake/t' is an Apache Iceberg table"), std::string::npos);
  EXPECT_NE(st.message().find("'lake/t/data/a.parquet'"), std::string::npos);
  st = Check({"/no/such/lake/.hoodie/hoodie.properties", "/no/such/lake/p=1/f_1.parquet"});
  ASSERT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("'lake' is an Apache Hudi table"), std::string::npos);
}

TEST(TableFormats, MetadataAloneLookalikesAndDeltaTablesPass) {
  // Metadata without data files: nothing would be read wrongly.
  EXPECT_TRUE(
      Check({"/no/such/lake/t/metadata/v1.metadata.json", "/no/such/lake/t/metadata/snap-1.avro"})
          .ok());
  // Not <name>.metadata.json inside a metadata/ folder.
  EXPECT_TRUE(Check({"/no/such/lake/metadata.json", "/no/such/lake/x/metadata/.metadata.json",
                     "/no/such/lake/x/notes.metadata.json", "/no/such/lake/x/a.parquet"})
                  .ok());
  // A Delta table that writes Iceberg metadata too (UniForm) is read through its log.
  EXPECT_TRUE(Check({"/no/such/lake/t/metadata/v1.metadata.json", "/no/such/lake/t/a.parquet"},
                    {"/no/such/lake/t"})
                  .ok());
  // Hidden files of a table (its _SUCCESS) are never data.
  EXPECT_TRUE(Check({"/no/such/lake/.hoodie/hoodie.properties", "/no/such/lake/_SUCCESS"}).ok());
}

}  // namespace
}  // namespace shardfeed
