#include "exec/decode.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <parquet/metadata.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  testing::TempDir dir;
  std::shared_ptr<Catalog> catalog;
  Layout layout;
  DecodeHooks hooks;

  explicit Fixture(int64_t rows = 100, int64_t row_group = 40) {
    testing::WriteIdFile(dir.path() / "data" / "a.parquet", 0, rows, row_group);
    catalog = *Catalog::Open({(dir.path() / "data").string()});
    OutputOptions options;
    options.columns = {"id", "x"};
    options.all_columns = false;
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

TEST(Decode, ACorruptPageIsInvalidDataNamingFileRowGroupAndColumn) {
  Fixture f;
  auto footer = RowGroupFooter(f.catalog->row_groups()[2]).ValueOrDie();
  auto chunk = footer->RowGroup(0)->ColumnChunk(0);  // "id"
  const int64_t start =
      chunk->has_dictionary_page() ? chunk->dictionary_page_offset() : chunk->data_page_offset();
  {
    std::fstream out(f.file(), std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(start);
    for (int64_t i = 0; i < chunk->total_compressed_size(); ++i) out.put('\xff');
  }
  // Catalogued again: a file rewritten after cataloguing is reported as changed.
  f.catalog = *Catalog::Open({(f.dir.path() / "data").string()});
  ASSERT_TRUE(f.Decode(0).ok());  // the other row groups are intact
  auto decoded = f.Decode(2);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kInvalidData) << decoded.status();
  const std::string message = decoded.status().message();
  EXPECT_NE(message.find("a.parquet"), std::string::npos) << message;
  EXPECT_NE(message.find("row group 2"), std::string::npos) << message;
  EXPECT_NE(message.find("column 'id'"), std::string::npos) << message;
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
