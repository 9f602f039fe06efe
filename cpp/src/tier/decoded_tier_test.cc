#include "shardfeed/decoded_tier.h"

#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "tier/decoded_tier_internal.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteText;

TEST(DecodedTier, UsageAndClearSeeOnlyTheTiersEntries) {
  TempDir dir;
  auto tier = DecodedTier::Open((dir.path() / "decoded").string(), 0).ValueOrDie();
  WriteText(dir.path() / "decoded" / "notes.txt", "not the tier's");
  const std::vector<float> values = {1, 2, 3};
  std::vector<DecodedColumn> columns(1);
  columns[0].dtype = DType::kFloat32;
  columns[0].values = reinterpret_cast<const uint8_t*>(values.data());
  columns[0].count = 3;
  tier->impl()->Store("key-a", columns, 3);
  tier->impl()->Store("key-b", columns, 3);

  auto usage = tier->Usage().ValueOrDie();
  EXPECT_EQ(usage.entries, 2);
  EXPECT_EQ(usage.bytes, tier->stats().stored_bytes);
  ASSERT_TRUE(tier->impl()->Load("key-a").ValueOrDie().has_value());

  EXPECT_EQ(tier->Clear().ValueOrDie(), usage.bytes);
  usage = tier->Usage().ValueOrDie();
  EXPECT_EQ(usage.entries, 0);
  EXPECT_EQ(usage.bytes, 0);
  EXPECT_EQ(tier->stats().bytes_on_disk, 0);
  EXPECT_FALSE(tier->impl()->Load("key-a").ValueOrDie().has_value());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "decoded" / "notes.txt"));
}

}  // namespace
}  // namespace shardfeed
