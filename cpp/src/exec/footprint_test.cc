#include "exec/footprint.h"

#include <cstdint>
#include <limits>
#include <memory>

#include <gtest/gtest.h>
#include <parquet/schema.h>

#include "transform/layout.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

parquet::ColumnDescriptor Column(parquet::Type::type type, parquet::Repetition::type repetition,
                                 int16_t max_def, int16_t max_rep) {
  return parquet::ColumnDescriptor(parquet::schema::PrimitiveNode::Make("c", repetition, type),
                                   max_def, max_rep);
}

TEST(DecodedChunkBytes, ValuesAtTheirWidthWithABitmapWhereNullable) {
  const auto required = Column(parquet::Type::FLOAT, parquet::Repetition::REQUIRED, 0, 0);
  EXPECT_EQ(DecodedChunkBytes(required, 1000, 1000, 7), 4000);
  const auto optional = Column(parquet::Type::DOUBLE, parquet::Repetition::OPTIONAL, 1, 0);
  EXPECT_EQ(DecodedChunkBytes(optional, 1000, 1000, 7), 8000 + 1000 / 8 + 1);
  const auto strings = Column(parquet::Type::BYTE_ARRAY, parquet::Repetition::REQUIRED, 0, 0);
  EXPECT_EQ(DecodedChunkBytes(strings, 10, 10, 500), 500 + 8 * 10);
}

TEST(LeastLimitForWindow, GivesTheWindowAndStaysBoundedOnUntrustedSizes) {
  constexpr double kShare = 3.0 / 8.0;  // PlanMemory's
  for (double cost : {1000.0, 3.3e6, 7.77e7, 1e15}) {
    const int64_t limit = LeastLimitForWindow(16, cost);
    EXPECT_GE(static_cast<int64_t>(kShare * static_cast<double>(limit) / cost), 16) << cost;
    if (cost < 1e9) {  // exact to the byte where a byte moves the double
      EXPECT_LT(static_cast<int64_t>(kShare * static_cast<double>(limit - 1) / cost), 16) << cost;
    }
  }
  // Past int64, or no row groups / sizes: no overflow, no endless mending.
  EXPECT_EQ(LeastLimitForWindow(16, 1e18), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(LeastLimitForWindow(16, std::numeric_limits<double>::infinity()),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(LeastLimitForWindow(0, 1000.0), 0);
  EXPECT_EQ(LeastLimitForWindow(16, 0.0), 0);
  EXPECT_EQ(LeastLimitForWindow(16, std::numeric_limits<double>::quiet_NaN()), 0);
}

TEST(DecodedChunkBytes, UntrustedFooterNumbersStayBounded) {
  // A corrupt count on a column that is not repeated is capped at the row
  // group's rows: otherwise the budget would book terabytes for it.
  const auto flat = Column(parquet::Type::INT64, parquet::Repetition::REQUIRED, 0, 0);
  EXPECT_EQ(DecodedChunkBytes(flat, int64_t{1} << 62, 100, 0), 800);
  EXPECT_EQ(DecodedChunkBytes(flat, INT64_MAX, 100, INT64_MAX), 800);
  EXPECT_EQ(DecodedChunkBytes(flat, -5, 100, -5), 0);
  EXPECT_EQ(DecodedChunkBytes(flat, 100, -1, 0), 0);
  // A repeated column may have more values than rows: capped at 2^40, no
  // overflow whatever the footer says.
  const auto repeated = Column(parquet::Type::BYTE_ARRAY, parquet::Repetition::REPEATED, 1, 1);
  const int64_t most = DecodedChunkBytes(repeated, INT64_MAX, 1, INT64_MAX);
  EXPECT_GT(most, 0);
  EXPECT_LE(most, (int64_t{1} << 40) * 10);
  EXPECT_EQ(DecodedChunkBytes(repeated, 30, 10, 100), 100 + 8 * 30);
  // Its levels, booked for the decode only: an int16 of each kind per value.
  EXPECT_EQ(LevelBytes(repeated, 30), 4 * 30);
  EXPECT_EQ(LevelBytes(repeated, INT64_MAX), 4 * (int64_t{1} << 40));
  EXPECT_EQ(LevelBytes(repeated, -3), 0);
  EXPECT_EQ(LevelBytes(flat, 100), 0);
}

class FootprintsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteIdFile(dir_.path() / "a.parquet", 0, 300, 100);
    testing::WriteIdFile(dir_.path() / "b.parquet", 300, 200, 100);
  }
  std::shared_ptr<const Catalog> Open() const {
    return Catalog::Open({dir_.path().string()}).ValueOrDie();
  }
  static Layout LayoutOf(const Catalog& catalog, std::vector<std::string> columns) {
    OutputOptions o;
    o.columns = std::move(columns);
    o.all_columns = o.columns.empty();
    return MakeLayout(*catalog.schema(), o).ValueOrDie();
  }
  testing::TempDir dir_;
};

TEST_F(FootprintsTest, AreMadeOncePerCatalogAndColumns) {
  auto catalog = Open();
  const Layout all = LayoutOf(*catalog, {});
  const Layout ids = LayoutOf(*catalog, {"id"});
  const auto first = Footprints(catalog, all);
  ASSERT_EQ(first->size(), catalog->row_groups().size());
  EXPECT_EQ(Footprints(catalog, all), first);  // the same object, not made again
  const auto fresh = EstimateFootprints(*catalog, all);
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ((*first)[i].read, fresh[i].read);
    EXPECT_EQ((*first)[i].decoded, fresh[i].decoded);
    EXPECT_EQ((*first)[i].chunks, fresh[i].chunks);
  }
  // Other columns, or another catalog of the same files, are other entries.
  const auto only_ids = Footprints(catalog, ids);
  EXPECT_NE(only_ids, first);
  EXPECT_EQ((*only_ids)[0].decoded, 100 * 8 + 100 / 8 + 1);  // 100 int64 ids + bitmap
  EXPECT_EQ((*only_ids)[0].chunks, 1);
  auto other = Open();
  EXPECT_NE(Footprints(other, all), first);
}

TEST_F(FootprintsTest, ACatalogThatIsGoneIsNeverMatched) {
  auto catalog = Open();
  const Layout ids = LayoutOf(*catalog, {"id"});
  const auto before = Footprints(catalog, ids);
  catalog.reset();
  // Another dataset, perhaps at the freed catalog's address: its own numbers.
  testing::TempDir other_dir;
  testing::WriteIdFile(other_dir.path() / "c.parquet", 0, 50, 50);
  std::shared_ptr<const Catalog> other = Catalog::Open({other_dir.path().string()}).ValueOrDie();
  const auto after = Footprints(other, ids);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].decoded, 50 * 8 + 50 / 8 + 1);
  EXPECT_EQ(before->size(), 5u);  // what was handed out stays valid
}

TEST_F(FootprintsTest, APreBufferedRowGroupCountsOnceWhatTheTileReadTakes) {
  // The row groups are small: pre-buffered, their compressed chunks held
  // whole.  The tile read writes float32 "x" straight into a float32 matrix
  // (held once); int64 "id" it does not convert, so the group of "id" and "x"
  // is read as arrays first (held twice).
  auto catalog = Open();
  auto layout = [&](std::vector<std::string> members) {
    OutputOptions o;
    o.all_columns = false;
    o.stacks = {{"m", std::move(members)}};
    return MakeLayout(*catalog->schema(), o).ValueOrDie();
  };
  const Layout tiled = layout({"x"});
  const Layout converted = layout({"id", "x"});
  ASSERT_EQ(tiled.outputs[0].matrix_dtype, DType::kFloat32);
  ASSERT_EQ(converted.outputs[0].matrix_dtype, DType::kFloat32);
  const auto& rgs = catalog->row_groups();
  const auto once = Footprints(catalog, tiled);
  const auto twice = Footprints(catalog, converted);
  ASSERT_NE(once, twice);  // the same fields read another way: another entry
  for (size_t i = 0; i < rgs.size(); ++i) {
    ASSERT_TRUE(PreBuffered(rgs[i].total_bytes));
    const auto& a = (*once)[i];
    EXPECT_GT(a.decoded, 0);
    EXPECT_EQ(a.fused, a.decoded);
    EXPECT_EQ(a.array_chunks, 0);  // the tile read makes no array
    EXPECT_EQ(DecodeReservation(a, rgs[i].total_bytes),
              a.read + a.decoded + a.fused_held + a.held_objects);
    const auto& b = (*twice)[i];
    EXPECT_EQ(b.fused, 0);
    EXPECT_EQ(b.array_chunks, 2);  // "id" and "x" read whole as arrays
    EXPECT_EQ(b.matrix_extra, 0);  // a float32 matrix: narrower than int64 and float32 values
    EXPECT_EQ(DecodeReservation(b, rgs[i].total_bytes),
              b.read + 2 * b.decoded + b.held_objects + 2 * kColumnOverheadBytes);
  }
  // A transform on the member keeps it from the tile read: counted twice.
  OutputOptions o;
  o.all_columns = false;
  o.stacks = {{"m", {"x"}}};
  TransformSpec clip;
  clip.op = TransformOp::kClip;
  clip.column = "x";
  clip.b = 1;
  o.transforms = {clip};
  const auto clipped = Footprints(catalog, MakeLayout(*catalog->schema(), o).ValueOrDie());
  EXPECT_NE(clipped, once);
  EXPECT_EQ((*clipped)[0].fused, 0);
}

TEST_F(FootprintsTest, AMatrixWiderThanItsMembersIsBookedWhole) {
  // float32 "x" cast to float64: its stack's matrix takes 8 bytes a row where
  // the member's values took 4.
  auto catalog = Open();
  OutputOptions o;
  o.all_columns = false;
  o.stacks = {{"m", {"x"}}};
  TransformSpec cast;
  cast.op = TransformOp::kCast;
  cast.column = "x";
  cast.dtype = DType::kFloat64;
  o.transforms = {cast};
  const Layout wide = MakeLayout(*catalog->schema(), o).ValueOrDie();
  ASSERT_EQ(wide.outputs[0].matrix_dtype, DType::kFloat64);
  const auto fp = EstimateFootprints(*catalog, wide);
  const auto& rgs = catalog->row_groups();
  for (size_t i = 0; i < rgs.size(); ++i) {
    EXPECT_EQ(fp[i].matrix_extra, rgs[i].num_rows * 8 - fp[i].decoded) << i;
    EXPECT_EQ(DecodeReservation(fp[i], rgs[i].total_bytes),
              fp[i].read + 2 * fp[i].decoded - fp[i].fused + fp[i].fused_held + fp[i].matrix_extra +
                  fp[i].held_objects + fp[i].array_chunks * kColumnOverheadBytes);
  }
  EXPECT_EQ(EstimateFootprints(*catalog, LayoutOf(*catalog, {"x"}))[0].matrix_extra, 0);
  // A member listed twice, or in two stacks, is in two matrix columns: booked.
  OutputOptions twice;
  twice.all_columns = false;
  twice.stacks = {{"m", {"x", "x"}}};
  const auto doubled =
      EstimateFootprints(*catalog, MakeLayout(*catalog->schema(), twice).ValueOrDie());
  twice.stacks = {{"m", {"x"}}, {"n", {"x"}}};
  const auto shared =
      EstimateFootprints(*catalog, MakeLayout(*catalog->schema(), twice).ValueOrDie());
  for (size_t i = 0; i < rgs.size(); ++i) {
    EXPECT_EQ(doubled[i].matrix_extra, rgs[i].num_rows * 8 - doubled[i].decoded) << i;
    EXPECT_EQ(shared[i].matrix_extra, rgs[i].num_rows * 8 - shared[i].decoded) << i;
  }
}

}  // namespace
}  // namespace shardfeed
