#include "catalog/glob.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace shardfeed {
namespace {

TEST(Glob, ComponentsMatchAsFnmatch) {
  EXPECT_TRUE(MatchComponent("*.parquet", "part-0.parquet"));
  EXPECT_TRUE(MatchComponent("*", ""));
  EXPECT_FALSE(MatchComponent("*.parquet", "part-0.parquet.crc"));
  EXPECT_TRUE(MatchComponent("part-?.parquet", "part-7.parquet"));
  EXPECT_FALSE(MatchComponent("part-?.parquet", "part-17.parquet"));
  EXPECT_TRUE(MatchComponent("day=[12]", "day=2"));
  EXPECT_FALSE(MatchComponent("day=[12]", "day=3"));
  EXPECT_TRUE(MatchComponent("day=[!12]", "day=3"));
  EXPECT_TRUE(MatchComponent("day=[0-9]", "day=5"));
  EXPECT_FALSE(MatchComponent("day=[0-4]", "day=5"));
  EXPECT_TRUE(MatchComponent("[]]", "]"));    // ']' first in a set is a member
  EXPECT_TRUE(MatchComponent("a[b", "a[b"));  // an unclosed '[' is itself
  EXPECT_TRUE(MatchComponent("*a*b*", "xxaxxbxx"));
  EXPECT_FALSE(MatchComponent("*a*b*", "xxbxxaxx"));
}

TEST(Glob, NoPatternTakesLong) {
  // Exponential for a naive backtracking matcher: 30 stars, 2,000 characters.
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "*a";
  pattern += "*b";
  EXPECT_FALSE(MatchComponent(pattern, std::string(2000, 'a')));
  EXPECT_TRUE(MatchComponent(pattern, std::string(2000, 'a') + "b"));
  std::string deep = "b/x";
  std::string many = "b";
  for (int i = 0; i < 40; ++i) {
    deep += "/x";
    many += "/**";
  }
  EXPECT_TRUE(MatchGlob(many + "/y", {deep + "/z"}).empty());
  EXPECT_EQ(MatchGlob(many + "/z", {deep + "/z"}), std::vector<std::string>{deep + "/z"});
}

TEST(Glob, MagicAndFixedPart) {
  EXPECT_TRUE(HasGlobMagic("bucket/ds/*.parquet"));
  EXPECT_TRUE(HasGlobMagic("bucket/day=[1]"));
  EXPECT_FALSE(HasGlobMagic("bucket/ds/day=1/x.parquet"));
  EXPECT_EQ(GlobFixedPart("bucket/ds/day=*/x/*.parquet"), "bucket/ds");
  EXPECT_EQ(GlobFixedPart("/data/ds/**/*.parquet"), "/data/ds");
  EXPECT_EQ(GlobFixedPart("*/x"), "");
  EXPECT_EQ(GlobDepth("bucket/ds/*.parquet"), 1);
  EXPECT_EQ(GlobDepth("bucket/ds/day=*/x/*.parquet"), 3);
  EXPECT_EQ(GlobDepth("bucket/ds/**/*.parquet"), -1);
}

const std::vector<std::string> kFiles = {
    "b/ds/_SUCCESS",
    "b/ds/day=1/part-0.parquet",
    "b/ds/day=1/part-1.parquet",
    "b/ds/day=1/.part-0.parquet.crc",
    "b/ds/day=2/part-0.parquet",
    "b/ds/day=2/sub/part-9.parquet",
    "b/ds/_temporary/0/part-5.parquet",
    "b/ds/.hidden/part-6.parquet",
    "b/ds/top.parquet",
    "b/other/part-0.parquet",
};

std::vector<std::string> Match(const std::string& pattern) { return MatchGlob(pattern, kFiles); }

TEST(Glob, FilesAndFoldersAsPythonsGlobFindsThem) {
  EXPECT_EQ(Match("b/ds/day=*/*.parquet"),
            (std::vector<std::string>{"b/ds/day=1/part-0.parquet", "b/ds/day=1/part-1.parquet",
                                      "b/ds/day=2/part-0.parquet"}));
  // Folders match too (each read as a folder); no hidden ones.
  EXPECT_EQ(Match("b/ds/*"),
            (std::vector<std::string>{"b/ds/day=1", "b/ds/day=2", "b/ds/top.parquet"}));
  EXPECT_EQ(Match("b/ds/day=[2]/*"),
            (std::vector<std::string>{"b/ds/day=2/part-0.parquet", "b/ds/day=2/sub"}));
  // "**": any number of folders, none hidden; a match below another one is left out.
  EXPECT_EQ(Match("b/ds/**/*.parquet"),
            (std::vector<std::string>{"b/ds/day=1/part-0.parquet", "b/ds/day=1/part-1.parquet",
                                      "b/ds/day=2/part-0.parquet", "b/ds/day=2/sub/part-9.parquet",
                                      "b/ds/top.parquet"}));
  EXPECT_EQ(Match("b/ds/**"),
            (std::vector<std::string>{"b/ds/day=1", "b/ds/day=2", "b/ds/top.parquet"}));
  // A hidden component only when the pattern names it.
  EXPECT_EQ(Match("b/ds/_temporary/*/*.parquet"),
            (std::vector<std::string>{"b/ds/_temporary/0/part-5.parquet"}));
  // ... literally, or by a component that starts with "_" (as `.*` names hidden ones).
  EXPECT_EQ(Match("b/ds/_temp*/*/*.parquet"),
            (std::vector<std::string>{"b/ds/_temporary/0/part-5.parquet"}));
  EXPECT_TRUE(Match("b/ds/*/0/*.parquet").empty());
  EXPECT_EQ(Match("b/ds/.hidden/*"), (std::vector<std::string>{"b/ds/.hidden/part-6.parquet"}));
  EXPECT_EQ(Match("b/ds/day=1/.*"), (std::vector<std::string>{"b/ds/day=1/.part-0.parquet.crc"}));
  EXPECT_EQ(Match("b/*/part-0.parquet"), (std::vector<std::string>{"b/other/part-0.parquet"}));
  EXPECT_TRUE(Match("b/ds/day=3/*").empty());
  EXPECT_TRUE(Match("c/*").empty());
}

}  // namespace
}  // namespace shardfeed
