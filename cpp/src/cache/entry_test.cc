#include "cache/entry.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "cache/cache_test_util.h"
#include "util/hash.h"

namespace shardfeed::cache_internal {
namespace {

TEST(CacheEntry, NamesAreFixedLengthHexWhateverTheKey) {
  for (const std::string key : {"", "s3://b/k", "../../etc/passwd", "a/\n/b", "/abs/path"}) {
    const std::string name = EntryName(key);
    EXPECT_TRUE(IsEntryName(name)) << key;
    EXPECT_EQ(name, EntryName(key));
  }
  EXPECT_NE(EntryName("s3://b/k1"), EntryName("s3://b/k2"));
  EXPECT_FALSE(IsEntryName("shardfeed"));
  EXPECT_FALSE(IsEntryName(std::string(kEntryNameLength, 'G')));
  EXPECT_FALSE(IsEntryName(std::string(kEntryNameLength + 1, 'a')));
}

TEST(CacheEntry, MetadataRoundTripsAndEscapes) {
  EntryMeta meta{"s3://b/odd\nkey=1%\r", 123, "1700000000000000000", 0xdeadbeef01234567ULL};
  const std::string text = FormatMeta(meta);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);  // no forged lines
  auto parsed = ParseMeta(text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, meta);
}

TEST(CacheEntry, MalformedMetadataIsRejected) {
  const std::string good = FormatMeta({"k", 10, "v", 42});
  EXPECT_FALSE(ParseMeta(""));
  EXPECT_FALSE(ParseMeta("key=k\nsize=10\n"));
  EXPECT_FALSE(ParseMeta(good.substr(0, good.size() - 3)));  // torn write
  std::string bad_size = good;
  bad_size.replace(bad_size.find("size=10"), 7, "size=1x");
  EXPECT_FALSE(ParseMeta(bad_size));
  std::string bad_escape = good;
  bad_escape.replace(bad_escape.find("key=k"), 5, "key=%Z");
  EXPECT_FALSE(ParseMeta(bad_escape));
  EXPECT_TRUE(ParseMeta(good + "later_field=x\n"));  // newer fields are ignored
}

TEST(CacheEntry, ChecksumIsStreamingAndSeesOneByte) {
  const std::string bytes = testing::RandomBytes(3 << 20, 7);
  StreamingHash whole, parts;
  whole.Update(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); i += 100000) {
    parts.Update(bytes.data() + i, std::min<size_t>(100000, bytes.size() - i));
  }
  EXPECT_EQ(whole.Digest(), parts.Digest());
  std::string flipped = bytes;
  flipped[1234567] ^= 1;
  StreamingHash other;
  other.Update(flipped.data(), flipped.size());
  EXPECT_NE(other.Digest(), whole.Digest());
}

}  // namespace
}  // namespace shardfeed::cache_internal
