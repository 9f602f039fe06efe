#include "exec/decode.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <parquet/metadata.h>

#include "exec/tile_read.h"
#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

namespace fs = std::filesystem;

// "id" and "x" of WriteIdFile as columns.
OutputOptions Columns() {
  OutputOptions options;
  options.columns = {"id", "x"};
  options.all_columns = false;
  return options;
}

// The same, each as a stack of its own (read by the tile read: tile_read.h).
OutputOptions Stacks() {
  OutputOptions options;
  options.all_columns = false;
  options.stacks = {{"ids", {"id"}}, {"xs", {"x"}}};
  return options;
}

struct Fixture {
  testing::TempDir dir;
  std::shared_ptr<Catalog> catalog;
  Layout layout;
  DecodeHooks hooks;

  explicit Fixture(int64_t rows = 100, int64_t row_group = 40,
                   const OutputOptions& options = Columns()) {
    testing::WriteIdFile(dir.path() / "data" / "a.parquet", 0, rows, row_group);
    catalog = *Catalog::Open({(dir.path() / "data").string()});
    layout = *MakeLayout(*catalog->schema(), options);
    hooks.clock = std::make_shared<StageClock>(false);
  }
  arrow::Result<std::shared_ptr<const DecodedRowGroup>> Decode(int32_t rg) {
    return DecodeRowGroup(*catalog, rg, layout, RandomKey{}, hooks);
  }
  fs::path file() const { return dir.path() / "data" / "a.parquet"; }
};

TEST(Decode, ARowGroupDecodesToItsValues) {
  Fixture f;
  ASSERT_EQ(f.catalog->row_groups().size(), 3u);
  auto decoded = f.Decode(1);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const auto& rg = **decoded;
  EXPECT_EQ(rg.first_row, 40);
  ASSERT_EQ(rg.num_rows, 40);
  ASSERT_EQ(rg.columns.size(), 2u);
  const auto* ids = reinterpret_cast<const int64_t*>(rg.columns[0].values);
  const auto* xs = reinterpret_cast<const float*>(rg.columns[1].values);
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(ids[i], 40 + i);
    EXPECT_EQ(xs[i], static_cast<float>(40 + i) / 2);
  }
}

// Overwrites column `column`'s chunk of row group `rg` with `byte`s, then
// catalogues the folder again (a file rewritten after cataloguing is
// reported as changed) and decodes `rg`: an InvalidData naming the file, the
// row group and the column is expected.
void ExpectCorruptChunkNamed(Fixture& f, int32_t rg, int column, char byte,
                             const std::string& name) {
  auto footer = RowGroupFooter(f.catalog->row_groups()[static_cast<size_t>(rg)]).ValueOrDie();
  auto chunk = footer->RowGroup(0)->ColumnChunk(column);
  const int64_t start =
      chunk->has_dictionary_page() ? chunk->dictionary_page_offset() : chunk->data_page_offset();
  {
    std::fstream out(f.file(), std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(start);
    for (int64_t i = 0; i < chunk->total_compressed_size(); ++i) out.put(byte);
  }
  f.catalog = *Catalog::Open({(f.dir.path() / "data").string()});
  ASSERT_TRUE(f.Decode(0).ok());  // the other row groups are intact
  auto decoded = f.Decode(rg);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kInvalidData) << decoded.status();
  const std::string message = decoded.status().message();
  EXPECT_NE(message.find("a.parquet"), std::string::npos) << message;
  EXPECT_NE(message.find("row group " + std::to_string(rg)), std::string::npos) << message;
  EXPECT_NE(message.find("column '" + name + "'"), std::string::npos) << message;
}

TEST(Decode, ACorruptPageIsInvalidDataNamingFileRowGroupAndColumn) {
  Fixture f;
  ExpectCorruptChunkNamed(f, 2, 0, '\xff', "id");
}

TEST(Decode, ACorruptPageOfAStackIsInvalidDataNamingFileRowGroupAndColumn) {
  Fixture f(100, 40, Stacks());
  ExpectCorruptChunkNamed(f, 2, 1, '\x7f', "x");
}

TEST(Decode, StacksOfPlainNumbersHoldTheirValuesAcrossTiles) {
  const int64_t rows = 3 * kTileRows + 5, group = 2 * kTileRows + 1;
  Fixture f(rows, group, Stacks());
  ASSERT_EQ(f.catalog->row_groups().size(), 2u);
  for (int32_t rg = 0; rg < 2; ++rg) {
    auto decoded = f.Decode(rg);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const auto& d = **decoded;
    ASSERT_EQ(d.stacks.size(), 2u);
    ASSERT_EQ(d.stacks[0]->size(), d.num_rows * 8);
    const auto* ids = reinterpret_cast<const int64_t*>(d.stacks[0]->data());
    const auto* xs = reinterpret_cast<const float*>(d.stacks[1]->data());
    for (int64_t i = 0; i < d.num_rows; ++i) {
      ASSERT_EQ(ids[i], d.first_row + i);
      ASSERT_EQ(xs[i], static_cast<float>(d.first_row + i) / 2);
    }
  }
}

TEST(Decode, TheTileReadTakesOnlyPlainNumbersOfTheMatrixType) {
  Fixture f(10, 10, Stacks());
  auto footer = RowGroupFooter(f.catalog->row_groups()[0]).ValueOrDie();
  parquet::arrow::SchemaManifest manifest;
  ASSERT_TRUE(parquet::arrow::SchemaManifest::Make(footer->schema(), footer->key_value_metadata(),
                                                   parquet::default_arrow_reader_properties(),
                                                   &manifest)
                  .ok());
  // Fields of the layout: id (0), x (1); the file's columns: id, x, v.
  const auto fields = FlattenStructs(manifest);
  EXPECT_EQ(TileLeaf(f.layout, 0, 0, fields, *footer, DType::kInt64), 0);
  EXPECT_EQ(TileLeaf(f.layout, 1, 1, fields, *footer, DType::kFloat32), 1);
  EXPECT_FALSE(TileLeaf(f.layout, 1, 1, fields, *footer, DType::kFloat64));   // a cast
  EXPECT_FALSE(TileLeaf(f.layout, 1, 2, fields, *footer, DType::kFloat32));   // a list
  EXPECT_FALSE(TileLeaf(f.layout, 1, -1, fields, *footer, DType::kFloat32));  // not in the file
  EXPECT_FALSE(TileLeaf(f.layout, 1, 7, fields, *footer, DType::kFloat32));
}

TEST(Decode, AFileRemovedAfterCataloguingIsReportedAsChanged) {
  Fixture f;
  fs::remove(f.file());
  auto decoded = f.Decode(0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kInvalidData) << decoded.status();
  EXPECT_NE(decoded.status().message().find("a.parquet"), std::string::npos);
  EXPECT_NE(decoded.status().message().find("removed"), std::string::npos);
}

TEST(Decode, AFailedReadIsAStorageErrorNotBadData) {
  Fixture f;
  f.hooks.open = [](int32_t) -> arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> {
    // Opens, then every read fails as a dropped connection would.
    class Failing : public arrow::io::RandomAccessFile {
     public:
      arrow::Status Close() override { return arrow::Status::OK(); }
      bool closed() const override { return false; }
      arrow::Result<int64_t> Tell() const override { return 0; }
      arrow::Status Seek(int64_t) override { return arrow::Status::OK(); }
      arrow::Result<int64_t> GetSize() override { return 1 << 20; }
      arrow::Result<int64_t> Read(int64_t, void*) override { return Fail(); }
      arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t) override { return Fail(); }
      arrow::Result<int64_t> ReadAt(int64_t, int64_t, void*) override { return Fail(); }
      arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t, int64_t) override {
        return Fail();
      }

     private:
      static arrow::Status Fail() { return arrow::Status::IOError("connection reset by peer"); }
    };
    return std::make_shared<Failing>();
  };
  auto decoded = f.Decode(0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kStorage) << decoded.status();
  EXPECT_NE(decoded.status().message().find("connection reset"), std::string::npos);
  EXPECT_NE(decoded.status().message().find("row group 0"), std::string::npos);
}

}  // namespace
}  // namespace shardfeed
