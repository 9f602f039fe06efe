// The tile read through DecodeRowGroup (tests/test_tile_read.py checks its
// values against NumPy across writers' settings; these run under ASan too).
#include "exec/tile_read.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <parquet/metadata.h>

#include "exec/decode.h"
#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

namespace fs = std::filesystem;

// "id" (int64) and "x" (float32) of WriteIdFile, each as a stack of its own.
struct Stacks {
  testing::TempDir dir;
  std::shared_ptr<Catalog> catalog;
  Layout layout;
  DecodeHooks hooks;

  explicit Stacks(int64_t rows, int64_t row_group) {
    testing::WriteIdFile(dir.path() / "data" / "a.parquet", 0, rows, row_group);
    catalog = *Catalog::Open({(dir.path() / "data").string()});
    OutputOptions options;
    options.all_columns = false;
    options.stacks = {{"ids", {"id"}}, {"xs", {"x"}}};
    layout = *MakeLayout(*catalog->schema(), options);
    hooks.clock = std::make_shared<StageClock>(false);
  }
  arrow::Result<std::shared_ptr<const DecodedRowGroup>> Decode(int32_t rg) {
    return DecodeRowGroup(*catalog, rg, layout, RandomKey{}, hooks);
  }
  fs::path file() const { return dir.path() / "data" / "a.parquet"; }
};

TEST(TileRead, StacksOfPlainNumbersHoldTheirValuesAcrossTiles) {
  const int64_t rows = 3 * kTileRows + 5, group = 2 * kTileRows + 1;
  Stacks f(rows, group);
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

TEST(TileRead, TakesOnlyPlainNumbersOfTheMatrixType) {
  Stacks f(10, 10);
  auto footer = RowGroupFooter(f.catalog->row_groups()[0]).ValueOrDie();
  parquet::arrow::SchemaManifest manifest;
  ASSERT_TRUE(parquet::arrow::SchemaManifest::Make(footer->schema(), footer->key_value_metadata(),
                                                   parquet::default_arrow_reader_properties(),
                                                   &manifest)
                  .ok());
  // Fields of the layout: id (0), x (1); the file's columns: id, x, v.
  EXPECT_EQ(TileLeaf(f.layout, 0, 0, manifest, *footer, DType::kInt64), 0);
  EXPECT_EQ(TileLeaf(f.layout, 1, 1, manifest, *footer, DType::kFloat32), 1);
  EXPECT_FALSE(TileLeaf(f.layout, 1, 1, manifest, *footer, DType::kFloat64));   // a cast
  EXPECT_FALSE(TileLeaf(f.layout, 1, 2, manifest, *footer, DType::kFloat32));   // a list
  EXPECT_FALSE(TileLeaf(f.layout, 1, -1, manifest, *footer, DType::kFloat32));  // not in the file
  EXPECT_FALSE(TileLeaf(f.layout, 1, 7, manifest, *footer, DType::kFloat32));
}

TEST(TileRead, ACorruptPageIsInvalidDataNamingFileRowGroupAndColumn) {
  Stacks f(100, 40);
  auto footer = RowGroupFooter(f.catalog->row_groups()[2]).ValueOrDie();
  auto chunk = footer->RowGroup(0)->ColumnChunk(1);  // "x"
  const int64_t start =
      chunk->has_dictionary_page() ? chunk->dictionary_page_offset() : chunk->data_page_offset();
  {
    std::fstream out(f.file(), std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(start);
    for (int64_t i = 0; i < chunk->total_compressed_size(); ++i) out.put('\x7f');
  }
  f.catalog = *Catalog::Open({(f.dir.path() / "data").string()});
  ASSERT_TRUE(f.Decode(0).ok());
  auto decoded = f.Decode(2);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kInvalidData) << decoded.status();
  const std::string message = decoded.status().message();
  EXPECT_NE(message.find("a.parquet"), std::string::npos) << message;
  EXPECT_NE(message.find("row group 2"), std::string::npos) << message;
  EXPECT_NE(message.find("column 'x'"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardfeed
