#include "tier/superseded.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shardfeed/catalog.h"
#include "tier/tier_test_util.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

TEST(SupersededKeys, TheOldVersionsOfTheCatalogsFilesOnly) {
  TempDir dir, other;
  WriteIdFile(dir.path() / "a.parquet", 0, 40, 10);
  WriteIdFile(dir.path() / "x.parquet", 100, 20, 10);
  // A path that begins with another file's path and a '|'.
  WriteIdFile(dir.path() / "x.parquet|y.parquet", 200, 20, 10);
  WriteIdFile(other.path() / "a.parquet", 0, 40, 10);
  auto before = Catalog::Open({dir.path().string()}).ValueOrDie();
  const auto layout = testing::AllColumnsLayout(*before);
  const auto old_keys = testing::TierKeysByFile(*before, layout);
  const auto elsewhere =
      testing::TierKeysByFile(*Catalog::Open({other.path().string()}).ValueOrDie(), layout);

  WriteIdFile(dir.path() / "a.parquet", 1000, 50, 10);  // rewritten
  WriteIdFile(dir.path() / "x.parquet|y.parquet", 300, 30, 10);
  auto after = Catalog::Open({dir.path().string()}).ValueOrDie();
  const SupersededKeys superseded(*after);
  for (const auto& [name, key] : old_keys) {
    EXPECT_EQ(superseded(key), name != "x.parquet") << key;
  }
  for (const auto& [name, key] : testing::TierKeysByFile(*after, layout))
    EXPECT_FALSE(superseded(key)) << key;
  for (const auto& [name, key] : elsewhere) EXPECT_FALSE(superseded(key)) << key;

  // An older format of a current key is superseded; the same key with a
  // suffix (another layout) is not; text that is no key is not.
  const std::string current = testing::TierKeysByFile(*after, layout).find("x.parquet")->second;
  EXPECT_TRUE(superseded("v3" + current.substr(2)));
  EXPECT_FALSE(superseded(current + "|extra:int64"));
  for (const std::string& junk :
       std::vector<std::string>{"", "v", "v|", "v4", "x4|" + current.substr(3), "key-a"}) {
    EXPECT_FALSE(superseded(junk)) << junk;
  }
}

}  // namespace
}  // namespace shardfeed
