#include "catalog/deletion_vector.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <arrow/filesystem/localfs.h>
#include <arrow/util/crc32.h>
#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;

// The protocol's examples (PROTOCOL.md, "Deletion Vector Descriptor Schema").
constexpr char kSpecInline[] = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L";  // native
constexpr char kSpecRelative[] = "ab^-aqEH.-t@S}K{vb[*k^";
const std::vector<int64_t> kSpecRows = {3, 4, 7, 11, 18, 29};

std::string Bytes(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}
void Put16(std::string* out, uint32_t v) { *out += Bytes({int(v & 0xFF), int(v >> 8 & 0xFF)}); }
void Put32(std::string* out, uint32_t v) {
  Put16(out, v & 0xFFFF);
  Put16(out, v >> 16);
}
void PutBig32(std::string* out, uint32_t v) {
  *out += Bytes({int(v >> 24), int(v >> 16 & 0xFF), int(v >> 8 & 0xFF), int(v & 0xFF)});
}

// The portable format: magic, bucket count, then (key, 32-bit Roaring bitmap)s.
std::string Portable(const std::vector<std::pair<uint32_t, std::string>>& buckets) {
  std::string out;
  Put32(&out, 1681511377);
  Put32(&out, static_cast<uint32_t>(buckets.size()));
  Put32(&out, 0);
  for (const auto& [key, bitmap] : buckets) {
    Put32(&out, key);
    out += bitmap;
  }
  return out;
}

// A 32-bit Roaring bitmap of one array container (RoaringFormatSpec, no runs).
std::string ArrayBitmap(uint16_t key, const std::vector<uint16_t>& values) {
  std::string out;
  Put32(&out, 12346);
  Put32(&out, 1);
  Put16(&out, key);
  Put16(&out, static_cast<uint32_t>(values.size() - 1));
  Put32(&out, 4 + 4 + 4 + 4);  // the container's offset
  for (uint16_t v : values) Put16(&out, v);
  return out;
}

std::vector<int64_t> Rows(const std::vector<RowRun>& runs) {
  std::vector<int64_t> out;
  for (const auto& run : runs) {
    for (int64_t r = run.begin; r < run.end; ++r) out.push_back(r);
  }
  return out;
}

TEST(DeletionVector, Z85DecodesTheProtocolsUuidAndRefusesBadText) {
  auto uuid = Z85Decode(std::string(kSpecRelative).substr(2));
  ASSERT_TRUE(uuid.ok()) << uuid.status().ToString();
  EXPECT_EQ(*uuid, Bytes({0xd2, 0xc6, 0x39, 0xaa, 0x88, 0x16, 0x43, 0x1a, 0xaa, 0xf6, 0xd3, 0xfe,
                          0x25, 0x12, 0xff, 0x61}));
  EXPECT_EQ(*Z85Decode(""), "");
  for (const char* bad : {"abcd", "abcd\"", "ab cd", "#####"}) {
    auto decoded = Z85Decode(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(KindOf(decoded.status()), ErrorKind::kInvalidData);
  }
}

TEST(DeletionVector, FilesAreNamedAsTheProtocolSays) {
  arrow::fs::LocalFileSystem fs;
  DeletionVectorDescriptor dv{"u", kSpecRelative, 4, 40, 6};
  EXPECT_EQ(DeletionVectorFile(fs, "/t", dv).ValueOrDie(),
            "/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin");
  dv.path_or_inline = std::string(kSpecRelative).substr(2);  // no random prefix
  EXPECT_EQ(DeletionVectorFile(fs, "/t", dv).ValueOrDie(),
            "/t/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin");
  dv = {"p", "/elsewhere/deletion_vector_x.bin", 1, 40, 6};
  EXPECT_EQ(DeletionVectorFile(fs, "/t", dv).ValueOrDie(), "/elsewhere/deletion_vector_x.bin");
  dv.path_or_inline = "file:///elsewhere/d.bin";
  EXPECT_EQ(DeletionVectorFile(fs, "/t", dv).ValueOrDie(), "/elsewhere/d.bin");
  for (const DeletionVectorDescriptor& bad :
       {DeletionVectorDescriptor{"u", "short", 1, 40, 6},
        DeletionVectorDescriptor{"u", std::string("..") + (kSpecRelative + 2), 1, 40, 6},
        DeletionVectorDescriptor{"u", std::string("a/b") + (kSpecRelative + 2), 1, 40, 6},
        DeletionVectorDescriptor{"x", kSpecRelative, 1, 40, 6},
        DeletionVectorDescriptor{"i", kSpecInline, std::nullopt, 40, 6}}) {
    auto path = DeletionVectorFile(fs, "/t", bad);
    ASSERT_FALSE(path.ok()) << bad.storage_type << bad.path_or_inline;
    EXPECT_EQ(KindOf(path.status()), ErrorKind::kInvalidData);
  }
}

TEST(DeletionVector, ReadsTheProtocolsInlineExampleAndThePortableFormat) {
  const std::string native = Z85Decode(kSpecInline).ValueOrDie();
  EXPECT_EQ(Rows(ParseDeletionVector(native).ValueOrDie()), kSpecRows);
  // The same rows as pyroaring's BitMap64([3, 4, 7, 11, 18, 29]).serialize() writes them.
  const std::string portable = Portable({{0, ArrayBitmap(0, {3, 4, 7, 11, 18, 29})}});
  auto runs = ParseDeletionVector(portable).ValueOrDie();
  EXPECT_EQ(Rows(runs), kSpecRows);
  EXPECT_EQ(runs.size(), 5u);  // 3-4 is one run
  EXPECT_TRUE(ParseDeletionVector(Portable({})).ValueOrDie().empty());
}

TEST(DeletionVector, ReadsRunAndBitmapContainersAndHighBuckets) {
  // A run container: cookie 12347 with one container, its run flag, no offsets.
  std::string runs;
  Put32(&runs, 12347);
  runs += Bytes({1});
  Put16(&runs, 0);   // key
  Put16(&runs, 99);  // cardinality - 1
  Put16(&runs, 1);   // one run
  Put16(&runs, 10);  // start
  Put16(&runs, 99);  // length - 1
  // A bitmap container (more than 4096 values): rows 65536 + [0, 5000).
  std::string bitmap;
  Put32(&bitmap, 12346);
  Put32(&bitmap, 1);
  Put16(&bitmap, 1);
  Put16(&bitmap, 4999);
  Put32(&bitmap, 16);
  for (int w = 0; w < 1024; ++w) {
    const int set = std::clamp(5000 - w * 64, 0, 64);
    const uint64_t word = set == 64 ? ~uint64_t{0} : (uint64_t{1} << set) - 1;
    Put32(&bitmap, static_cast<uint32_t>(word));
    Put32(&bitmap, static_cast<uint32_t>(word >> 32));
  }
  const auto parsed = ParseDeletionVector(Portable({{0, runs}, {1, ArrayBitmap(0, {5})}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].begin, 10);
  EXPECT_EQ((*parsed)[0].end, 110);
  EXPECT_EQ((*parsed)[1].begin, (int64_t{1} << 32) + 5);
  EXPECT_EQ((*parsed)[1].end, (int64_t{1} << 32) + 6);
  const auto dense = ParseDeletionVector(Portable({{0, bitmap}})).ValueOrDie();
  ASSERT_EQ(dense.size(), 1u);
  EXPECT_EQ(dense[0].begin, 65536);
  EXPECT_EQ(dense[0].end, 65536 + 5000);
}

// A 32-bit Roaring bitmap of one bitmap container: the values of [0, 65536) that `in` holds.
template <typename Pred>
std::string BitmapContainer(uint16_t key, Pred in, std::vector<int64_t>* values) {
  std::vector<uint64_t> words(1024, 0);
  for (int64_t v = 0; v < 65536; ++v) {
    if (!in(v)) continue;
    words[static_cast<size_t>(v / 64)] |= uint64_t{1} << (v % 64);
    values->push_back((int64_t{key} << 16) + v);
  }
  std::string out;
  Put32(&out, 12346);
  Put32(&out, 1);
  Put16(&out, key);
  Put16(&out, static_cast<uint32_t>(values->size() - 1));
  Put32(&out, 16);
  for (uint64_t word : words) {
    Put32(&out, static_cast<uint32_t>(word));
    Put32(&out, static_cast<uint32_t>(word >> 32));
  }
  return out;
}

TEST(DeletionVector, BitmapContainersGiveEveryRunEdge) {
  const std::vector<std::function<bool(int64_t)>> patterns = {
      [](int64_t v) { return v % 3 != 0; },
      [](int64_t v) { return (v / 64) % 2 == 0; },         // whole words
      [](int64_t v) { return v >= 63 && v < 5000 + 65; },  // across word edges
      [](int64_t v) { return v % 2 == 1 || v > 60000; },   // to the container's end
      [](int64_t) { return true; },
  };
  for (size_t p = 0; p < patterns.size(); ++p) {
    std::vector<int64_t> values;
    const std::string bitmap = BitmapContainer(3, patterns[p], &values);
    const auto runs = ParseDeletionVector(Portable({{0, bitmap}}));
    ASSERT_TRUE(runs.ok()) << p << runs.status().ToString();
    EXPECT_EQ(Rows(*runs), values) << p;
    for (size_t r = 1; r < runs->size(); ++r) EXPECT_LT((*runs)[r - 1].end, (*runs)[r].begin);
  }
}

TEST(DeletionVector, LiveRunsAreTheRowsBetweenDeletions) {
  const auto runs = [](const std::vector<RowRun>& v) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& r : v) out.emplace_back(r.begin, r.end);
    return out;
  };
  using Pairs = std::vector<std::pair<int64_t, int64_t>>;
  DeletedRows deleted{"x", {{2, 4}, {10, 12}, {20, 30}}, 14};
  EXPECT_EQ(runs(LiveRuns(nullptr, 5, 9)), (Pairs{{5, 9}}));
  EXPECT_EQ(runs(LiveRuns(&deleted, 0, 40)), (Pairs{{0, 2}, {4, 10}, {12, 20}, {30, 40}}));
  EXPECT_EQ(runs(LiveRuns(&deleted, 3, 11)), (Pairs{{4, 10}}));  // cut runs at both ends
  EXPECT_EQ(runs(LiveRuns(&deleted, 21, 29)), Pairs{});          // inside one run
  EXPECT_EQ(runs(LiveRuns(&deleted, 4, 10)), (Pairs{{4, 10}}));  // between two runs
  EXPECT_EQ(runs(LiveRuns(&deleted, 30, 35)), (Pairs{{30, 35}}));
}

TEST(DeletionVector, DamageIsAnErrorAtEveryLength) {
  const std::string good = Portable({{0, ArrayBitmap(0, {3, 4, 7})}, {2, ArrayBitmap(7, {1})}});
  ASSERT_TRUE(ParseDeletionVector(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    auto cut = ParseDeletionVector(good.substr(0, n));
    ASSERT_FALSE(cut.ok()) << n;
    EXPECT_EQ(KindOf(cut.status()), ErrorKind::kInvalidData);
  }
  for (const std::string& bad : {
           good + "x",                                                      // trailing bytes
           Portable({{2, ArrayBitmap(0, {1})}, {1, ArrayBitmap(0, {1})}}),  // buckets unsorted
           Portable({{0, ArrayBitmap(0, {4, 3})}}),                         // values unsorted
           Portable({{0, ArrayBitmap(0, {4, 4})}}),                         // a value twice
           Portable({{0x80000000u, ArrayBitmap(0, {1})}}),                  // a row above 2^63
           std::string("\x01\x02\x03\x04") + good.substr(4),                // another magic
       }) {
    auto parsed = ParseDeletionVector(bad);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(KindOf(parsed.status()), ErrorKind::kInvalidData) << parsed.status().ToString();
  }
  // A header that promises more buckets than the bytes hold fails fast.
  std::string huge;
  Put32(&huge, 1681511377);
  Put32(&huge, 0xFFFFFFFF);
  Put32(&huge, 0xFFFFFFFF);
  EXPECT_FALSE(ParseDeletionVector(huge).ok());
}

// A DV file: the version byte, then per DV its big-endian size, bytes and CRC-32.
std::string DvFile(const std::vector<std::string>& dvs, std::vector<int64_t>* offsets) {
  std::string out = Bytes({1});
  for (const auto& dv : dvs) {
    offsets->push_back(static_cast<int64_t>(out.size()));
    PutBig32(&out, static_cast<uint32_t>(dv.size()));
    out += dv;
    PutBig32(&out, arrow::internal::crc32(0, dv.data(), dv.size()));
  }
  return out;
}

TEST(DeletionVector, ReaderChecksSizeChecksumAndCardinality) {
  TempDir dir;
  arrow::fs::LocalFileSystem fs;
  const std::string a = Portable({{0, ArrayBitmap(0, {0, 1, 2})}});
  const std::string b = Portable({{0, ArrayBitmap(0, {9})}});
  std::vector<int64_t> offsets;
  const std::string bytes = DvFile({a, b}, &offsets);
  const std::string name = "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin";
  testing::WriteText(dir.path() / "ab" / name, bytes);
  const std::string root = dir.path().string();
  DeletionVectorReader reader(fs, root, 0);
  const auto first = reader.Read({"u", kSpecRelative, offsets[0], int64_t(a.size()), 3});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->count, 3);
  EXPECT_EQ((*first)->id, std::string("u") + kSpecRelative + "@1");
  const auto second = reader.Read({"p", root + "/ab/" + name, offsets[1], int64_t(b.size()), 1});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(Rows((*second)->runs), std::vector<int64_t>{9});
  const auto inline_dv = reader.Read({"i", kSpecInline, std::nullopt, 40, 6});
  ASSERT_TRUE(inline_dv.ok()) << inline_dv.status().ToString();
  EXPECT_EQ(Rows((*inline_dv)->runs), kSpecRows);

  // A file above 64 MiB is read range by range rather than at once: the same rows.
  std::filesystem::resize_file(dir.path() / "ab" / name, int64_t{65} << 20);
  DeletionVectorReader ranges(fs, root, 0);
  for (int i = 0; i < 2; ++i) {
    const auto& dv = i == 0 ? a : b;
    const auto read = ranges.Read(
        {"u", kSpecRelative, offsets[static_cast<size_t>(i)], int64_t(dv.size()), i == 0 ? 3 : 1});
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    const std::vector<int64_t> rows =
        i == 0 ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{9};
    EXPECT_EQ(Rows((*read)->runs), rows);
  }

  const auto fails = [&](const DeletionVectorDescriptor& dv, ErrorKind kind, const char* says) {
    DeletionVectorReader fresh(fs, root, 0);
    auto read = fresh.Read(dv);
    ASSERT_FALSE(read.ok()) << says;
    EXPECT_EQ(KindOf(read.status()), kind) << read.status().ToString();
    EXPECT_NE(read.status().message().find(says), std::string::npos) << read.status().ToString();
  };
  fails({"u", kSpecRelative, offsets[0], int64_t(a.size()), 4}, ErrorKind::kInvalidData,
        "cardinality is 4");
  fails({"u", kSpecRelative, offsets[0], int64_t(a.size()) + 1, 3}, ErrorKind::kInvalidData,
        "the file says");
  fails({"u", kSpecRelative, offsets[0] + 1, int64_t(a.size()), 3}, ErrorKind::kInvalidData,
        "the file says");
  fails({"u", std::string("zz") + (kSpecRelative + 2), 1, int64_t(a.size()), 3},
        ErrorKind::kNotFound, "does not exist");
  fails({"u", kSpecRelative, std::numeric_limits<int64_t>::max(), int64_t(a.size()), 3},
        ErrorKind::kInvalidData, "in a file of");  // an offset past the end: no read at all
  fails({"i", kSpecInline, std::nullopt, 36, 6}, ErrorKind::kInvalidData, "inline text holds");
  fails({"i", kSpecInline, std::nullopt, 40, -1}, ErrorKind::kInvalidData, "no cardinality");

  // One byte of the second DV flipped: its checksum no longer matches.
  std::string damaged = bytes;
  damaged[static_cast<size_t>(offsets[1]) + 10] ^= 0x40;
  testing::WriteText(dir.path() / "ab" / name, damaged);
  fails({"u", kSpecRelative, offsets[1], int64_t(b.size()), 1}, ErrorKind::kInvalidData, "CRC-32");
  damaged[0] = 2;
  testing::WriteText(dir.path() / "ab" / name, damaged);
  fails({"u", kSpecRelative, offsets[0], int64_t(a.size()), 3}, ErrorKind::kInvalidData,
        "format version 1");
}

}  // namespace
}  // namespace shardfeed
