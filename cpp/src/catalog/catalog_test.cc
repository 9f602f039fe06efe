#include "shardfeed/catalog.h"

#include <filesystem>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;
using testing::WriteText;

TEST(Catalog, ListsFilesRecursivelyInRelativePathOrder) {
  TempDir dir;
  WriteIdFile(dir.path() / "b.parquet", 100, 50, 20);
  WriteIdFile(dir.path() / "a" / "z.parquet", 0, 30, 10);
  WriteIdFile(dir.path() / "empty.parquet", 0, 0, 10);
  WriteText(dir.path() / "notes.txt", "not parquet, not listed");
  auto catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
  ASSERT_EQ(catalog->files().size(), 2u);  // the zero-row file is skipped
  EXPECT_EQ(catalog->files()[0].rel_path, "a/z.parquet");
  EXPECT_EQ(catalog->files()[1].rel_path, "b.parquet");
  EXPECT_EQ(catalog->num_rows(), 80);
  ASSERT_EQ(catalog->row_groups().size(), 6u);  // 3 + 3
  EXPECT_EQ(catalog->row_groups()[3].first_row, 30);
  EXPECT_EQ(catalog->RowGroupRows(), (std::vector<int64_t>{10, 10, 10, 20, 20, 10}));
}

TEST(Catalog, KeepsEachRowGroupsOwnFooterAndTheFileWithoutRowGroups) {
  TempDir dir;
  WriteIdFile(dir.path() / "f.parquet", 0, 50, 20);  // row groups of 20, 20, 10
  auto catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
  auto whole = parquet::ReadMetaData(
      arrow::io::ReadableFile::Open((dir.path() / "f.parquet").string()).ValueOrDie());
  ASSERT_EQ(catalog->row_groups().size(), 3u);
  const auto& file = catalog->files()[0];
  EXPECT_EQ(file.metadata->num_row_groups(), 0);
  EXPECT_EQ(file.metadata->schema()->num_columns(), whole->schema()->num_columns());
  for (int g = 0; g < 3; ++g) {
    const auto& rg = catalog->row_groups()[static_cast<size_t>(g)];
    auto footer = RowGroupFooter(rg).ValueOrDie();
    ASSERT_EQ(footer->num_row_groups(), 1);
    EXPECT_EQ(footer->RowGroup(0)->num_rows(), rg.num_rows);
    for (int c = 0; c < whole->num_columns(); ++c) {
      EXPECT_EQ(footer->RowGroup(0)->ColumnChunk(c)->data_page_offset(),
                whole->RowGroup(g)->ColumnChunk(c)->data_page_offset());
    }
  }
  RowGroupEntry bare;
  EXPECT_FALSE(RowGroupFooter(bare).ok());
  // Each part keeps the file's key-value metadata (ARROW:schema: the types
  // Arrow gives the columns when the row group is read).
  auto schema = arrow::schema({arrow::field("t", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"))});
  arrow::TimestampBuilder ts(schema->field(0)->type(), arrow::default_memory_pool());
  for (int i = 0; i < 30; ++i) (void)ts.Append(i);
  auto table = arrow::Table::Make(schema, {ts.Finish().ValueOrDie()});
  std::filesystem::create_directories(dir.path() / "t");
  auto out = arrow::io::FileOutputStream::Open((dir.path() / "t" / "t.parquet").string());
  ASSERT_TRUE(out.ok());
  auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
  ASSERT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *out, 10,
                                         parquet::default_writer_properties(), arrow_props)
                  .ok());
  ASSERT_TRUE((*out)->Close().ok());
  auto typed = Catalog::Open({(dir.path() / "t").string()}).ValueOrDie();
  auto part = RowGroupFooter(typed->row_groups()[1]).ValueOrDie();
  ASSERT_TRUE(part->key_value_metadata());
  EXPECT_TRUE(part->key_value_metadata()->Contains("ARROW:schema"));
  EXPECT_EQ(typed->files()[0].metadata->key_value_metadata()->ToString(),
            part->key_value_metadata()->ToString());
  bare.footer = std::make_shared<const std::string>("not thrift");
  EXPECT_FALSE(RowGroupFooter(bare).ok());
}

TEST(Catalog, FingerprintIgnoresTheRoot) {
  TempDir one, two;
  for (auto* d : {&one, &two}) {
    WriteIdFile(d->path() / "part-0.parquet", 0, 40, 16);
    WriteIdFile(d->path() / "part-1.parquet", 40, 40, 16);
  }
  auto a = Catalog::Open({one.path().string()}).ValueOrDie();
  auto b = Catalog::Open({two.path().string()}).ValueOrDie();
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  auto listed = Catalog::Open({(one.path() / "part-1.parquet").string(),
                               (one.path() / "part-0.parquet").string()})
                    .ValueOrDie();
  EXPECT_EQ(listed->fingerprint(), a->fingerprint());
  WriteIdFile(two.path() / "part-2.parquet", 80, 1, 16);
  auto c = Catalog::Open({two.path().string()}).ValueOrDie();
  EXPECT_NE(c->fingerprint(), a->fingerprint());
}

TEST(Catalog, ErrorsNameThePath) {
  TempDir dir;
  auto missing = Catalog::Open({(dir.path() / "nope").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(KindOf(missing.status()), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);

  auto empty = Catalog::Open({dir.path().string()});
  EXPECT_EQ(KindOf(empty.status()), ErrorKind::kNotFound);

  WriteText(dir.path() / "bad.parquet", "this is not a parquet file at all");
  auto bad = Catalog::Open({dir.path().string()});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(KindOf(bad.status()), ErrorKind::kInvalidData);
  EXPECT_NE(bad.status().message().find("bad.parquet"), std::string::npos);
}

TEST(Catalog, SkipsHiddenPathsAndSniffsFilesWithoutExtension) {
  TempDir dir;
  WriteIdFile(dir.path() / "date=2024-01-01" / "part-00000-c000", 0, 30, 10);
  WriteIdFile(dir.path() / "date=2024-01-02" / "part-00000.parquet", 30, 20, 10);
  WriteIdFile(dir.path() / "_temporary" / "0" / "attempt_1" / "date=2024-01-01" / "part-0.parquet",
              0, 30, 10);
  WriteText(dir.path() / "_SUCCESS", "");
  WriteText(dir.path() / "date=2024-01-01" / ".part-00000-c000.crc", "checksum");
  WriteText(dir.path() / "date=2024-01-01" / "notes", "not parquet, ignored");
  auto catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
  ASSERT_EQ(catalog->files().size(), 2u);
  EXPECT_EQ(catalog->files()[0].rel_path, "date=2024-01-01/part-00000-c000");
  EXPECT_EQ(catalog->num_rows(), 50);
  // The partition key follows the files' columns; each file holds its value.
  const auto& schema = *catalog->schema();
  ASSERT_EQ(schema.num_fields(), 4);
  EXPECT_EQ(schema.field(3)->ToString(), "date: string");
  EXPECT_EQ(catalog->column_origins()[3].partition_key, 0);
  EXPECT_EQ(catalog->files()[1].partition_values[0]->ToString(), "2024-01-02");
  EXPECT_EQ(catalog->files()[0].field_map, (std::vector<int>{0, 1, 2, -1}));

  CatalogOptions plain;
  plain.partitioning = Partitioning::kNone;
  auto without = Catalog::Open({dir.path().string()}, plain).ValueOrDie();
  EXPECT_EQ(without->schema()->num_fields(), 3);
  EXPECT_EQ(without->partition_schema()->num_fields(), 0);
}

}  // namespace
}  // namespace shardfeed
