#include "catalog/discover.h"

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(Discover, HiddenPathsAsSparkAndHiveSkipThem) {
  EXPECT_TRUE(IsHiddenPath("_SUCCESS"));
  EXPECT_TRUE(IsHiddenPath("_temporary/0/_temporary/attempt_1/part-0.parquet"));
  EXPECT_TRUE(IsHiddenPath("date=1/.part-0.parquet.crc"));
  EXPECT_TRUE(IsHiddenPath(".hive-staging/x"));
  EXPECT_FALSE(IsHiddenPath("date=1/part-0.parquet"));
  EXPECT_FALSE(IsHiddenPath("a_b/c.d"));
}

TEST(Discover, Extension) {
  EXPECT_TRUE(HasParquetExtension("x/y.parquet"));
  EXPECT_FALSE(HasParquetExtension("x/part-00000-c000"));
  EXPECT_FALSE(HasParquetExtension("parquet"));
}

TEST(Discover, MagicAtBothEnds) {
  auto check = [](const std::string& bytes) {
    arrow::io::BufferReader reader{arrow::Buffer::FromString(bytes)};
    return HasParquetMagic(reader, static_cast<int64_t>(bytes.size())).ValueOrDie();
  };
  EXPECT_TRUE(check("PAR1xxxxxxxxPAR1"));
  EXPECT_FALSE(check("PAR1xxxxxxxxPAR2"));
  EXPECT_FALSE(check("hello, world, PAR1"));
  EXPECT_FALSE(check("PAR1PAR1"));  // too short to be Parquet
}

}  // namespace
}  // namespace shardfeed
