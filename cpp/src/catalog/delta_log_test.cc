#include "catalog/delta_log.h"

#include <filesystem>
#include <string>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <arrow/util/crc32.h>
#include <gtest/gtest.h>

#include "shardfeed/catalog.h"
#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;
using testing::WriteText;

const char kProtocol[] = R"({"protocol":{"minReaderVersion":1,"minWriterVersion":2}})";
const char kMetaData[] =
    R"({"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{}",)"
    R"("partitionColumns":[],"configuration":{},"createdTime":1}})";

std::string Add(const std::string& path) {
  return R"({"add":{"path":")" + path +
         R"(","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,)"
         R"("stats":"{\"numRecords\":1}","tags":null}})";
}
std::string Remove(const std::string& path) {
  return R"({"remove":{"path":")" + path + R"(","deletionTimestamp":2,"dataChange":true}})";
}
std::string Lines(std::initializer_list<std::string> lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

arrow::Result<std::vector<std::string>> Replay(std::initializer_list<std::string> commits) {
  DeltaReplay replay;
  for (const auto& commit : commits) ARROW_RETURN_NOT_OK(replay.ApplyCommitText(commit, "t"));
  return replay.LiveFiles("t");
}

TEST(DeltaLog, ReplaysAddsAndRemovesInOrder) {
  auto files = Replay({Lines({kProtocol, kMetaData, Add("a.parquet"), Add("b.parquet")}),
                       Lines({R"({"commitInfo":{"operation":"DELETE","x":[1,{"y":null}]}})",
                              Add("c.parquet"), Remove("a.parquet")}),
                       Lines({Add("a%20x.parquet")})})
                   .ValueOrDie();
  EXPECT_EQ(files, (std::vector<std::string>{"a x.parquet", "b.parquet", "c.parquet"}));
}

TEST(DeltaLog, ACommitThatRemovesAndReaddsAPathKeepsIt) {
  // Written in either order in the commit: the path stays live.
  auto files =
      Replay({Lines({kProtocol, Add("a.parquet")}), Lines({Add("a.parquet"), Remove("a.parquet")})})
          .ValueOrDie();
  EXPECT_EQ(files, (std::vector<std::string>{"a.parquet"}));
}

TEST(DeltaLog, AnAddAndARemoveOfOneFileMatchHoweverTheyAreSpelled) {
  // The protocol's paths are URIs: a remove may name the file by an absolute
  // URI, or escape it where the add did not.  Either removes it.
  for (const auto& [root, removed] : std::vector<std::pair<std::string, std::string>>{
           {"/data/t", "file:///data/t/a.parquet"},
           {"/data/t", "file:/data/t/a.parquet"},
           {"/data/t/", "/data/t/a.parquet"},
           {"bucket/t", "s3://bucket/t/a.parquet"},
           {"bucket/t", "s3a://bucket/t/a.parquet"},
           {"/data/t", "file:///data/t/%61.parquet"},
           {"/data/t", "file://localhost/data/t/a.parquet"},
       }) {
    DeltaReplay replay(root);
    ASSERT_TRUE(
        replay.ApplyCommitText(Lines({kProtocol, Add("a.parquet"), Add("x%20y.parquet")}), "t")
            .ok());
    ASSERT_TRUE(replay.ApplyCommitText(Lines({Remove(removed), Remove("x y.parquet")}), "t").ok());
    EXPECT_EQ(replay.LiveFiles("t").ValueOrDie(), std::vector<std::string>{}) << removed;
  }
  // An absolute add inside the table is the file of that relative path; one
  // in another table, or one when no root is known, is refused when live.
  DeltaReplay inside("/data/t");
  ASSERT_TRUE(
      inside.ApplyCommitText(Lines({kProtocol, Add("file:///data/t/p%3D1/b.parquet")}), "t").ok());
  EXPECT_EQ(inside.LiveFiles("t").ValueOrDie(), std::vector<std::string>{"p=1/b.parquet"});
  // A colon in a relative path's first part is no scheme: a letter must
  // start one, and a path from a root follow it.
  DeltaReplay colons("/data/t");
  ASSERT_TRUE(
      colons
          .ApplyCommitText(
              Lines({kProtocol, Add("2024-01-01T10:00:00.parquet"), Add("a:b.parquet")}), "t")
          .ok());
  EXPECT_EQ(colons.LiveFiles("t").ValueOrDie(),
            (std::vector<std::string>{"2024-01-01T10:00:00.parquet", "a:b.parquet"}));
  DeltaReplay other("/data/t");
  ASSERT_TRUE(other
                  .ApplyCommitText(Lines({kProtocol, Add("file:///data/tt/b.parquet"),
                                          Remove("file:///data/t/b.parquet")}),
                                   "t")
                  .ok());
  EXPECT_FALSE(other.LiveFiles("t").ok());
}

TEST(DeltaLog, RefusesWhatItCannotReadCorrectly) {
  const auto message = [](std::initializer_list<std::string> commits) {
    auto result = Replay(commits);
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(KindOf(result.status()), ErrorKind::kInvalidData);
    return result.status().message();
  };
  EXPECT_NE(message({Lines({Add("a.parquet")})}).find("no protocol"), std::string::npos);
  EXPECT_NE(message({Lines({R"({"protocol":{"minReaderVersion":4}})"})}).find("version 4"),
            std::string::npos);
  EXPECT_NE(message({Lines({R"({"protocol":{"minReaderVersion":3,)"
                            R"("readerFeatures":["timestampNtz","someFutureThing"]}})"})})
                .find("'someFutureThing'"),
            std::string::npos);
  EXPECT_NE(message({Lines({R"({"protocol":{"minReaderVersion":2}})",
                            R"({"metaData":{"configuration":{"delta.columnMapping.mode":"id"}}})",
                            Add("a.parquet")})})
                .find("mapped by id"),
            std::string::npos);
  for (const char* outside : {"/abs/a.parquet", "s3://other/a.parquet", "../a.parquet",
                              "x/../../a.parquet", "x//a.parquet", "%2E%2E/a.parquet"}) {
    EXPECT_NE(message({Lines({kProtocol, Add(outside)})}).find("not a path inside the table"),
              std::string::npos)
        << outside;
  }
}

TEST(DeltaLog, LiveFilesCarryTheirDeletionVectors) {
  const std::string dv =
      R"({"add":{"path":"b.parquet","deletionVector":{"storageType":"u",)"
      R"("pathOrInlineDv":"ab^-aqEH.-t@S}K{vb[*k^","offset":4,"sizeInBytes":40,"cardinality":6}}})";
  const std::string newer =
      R"({"add":{"path":"b.parquet","deletionVector":{"storageType":"i",)"
      R"("pathOrInlineDv":"wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",)"
      R"("sizeInBytes":40,"cardinality":6}}})";
  for (const bool replaced : {false, true}) {
    DeltaReplay replay;
    ASSERT_TRUE(
        replay.ApplyCommit(*ParseDeltaCommit(Lines({kProtocol, Add("a.parquet"), dv})).ValueOrDie())
            .ok());
    if (replaced) {
      // A later DELETE on the same file: its remove and add, the new vector kept.
      ASSERT_TRUE(
          replay.ApplyCommit(*ParseDeltaCommit(Lines({newer, Remove("b.parquet")})).ValueOrDie())
              .ok());
    }
    std::vector<std::optional<DeletionVectorDescriptor>> dvs;
    auto files = replay.LiveFiles("t", &dvs);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_EQ(*files, (std::vector<std::string>{"a.parquet", "b.parquet"}));
    ASSERT_EQ(dvs.size(), 2u);
    EXPECT_FALSE(dvs[0]);
    ASSERT_TRUE(dvs[1]);
    EXPECT_EQ(dvs[1]->storage_type, replaced ? "i" : "u");
    EXPECT_EQ(dvs[1]->offset, replaced ? std::nullopt : std::optional<int64_t>(4));
    EXPECT_EQ(dvs[1]->size_in_bytes, 40);
    EXPECT_EQ(dvs[1]->cardinality, 6);
    EXPECT_EQ(dvs[1]->UniqueId(), replaced ? "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
                                           : "uab^-aqEH.-t@S}K{vb[*k^@4");
  }
}

std::string AddIn(const std::string& path, const std::string& values) {
  return R"({"add":{"path":")" + path + R"(","partitionValues":)" + values + "}}";
}

TEST(DeltaLog, PartitionValuesComeFromTheLogNotTheFolders) {
  const std::string partitioned =
      R"({"metaData":{"partitionColumns":["day","n"],"configuration":{}}})";
  DeltaReplay replay;
  // Folders that name other values, none, or the partition under a random prefix.
  ASSERT_TRUE(replay
                  .ApplyCommitText(Lines({kProtocol, partitioned,
                                          AddIn("day=9/a.parquet", R"({"day":"1","n":"7"})"),
                                          AddIn("Ab/b.parquet", R"({"n":null,"day":"2"})"),
                                          AddIn("c.parquet", R"({"day":"","x":"3"})")}),
                                   "t")
                  .ok());
  // A checkpoint's partitionValues is a map<string, string>.
  const auto json = [](const std::shared_ptr<arrow::DataType>& type, const std::string& text) {
    return arrow::json::ArrayFromJSONString(type, text).ValueOrDie();
  };
  auto values =
      arrow::MapArray::FromArrays(json(arrow::int32(), "[0, 1]"), json(arrow::utf8(), R"(["day"])"),
                                  json(arrow::utf8(), R"(["3"])"))
          .ValueOrDie();
  auto add =
      arrow::StructArray::Make(arrow::ArrayVector{json(arrow::utf8(), R"(["d.parquet"])"), values},
                               std::vector<std::string>{"path", "partitionValues"})
          .ValueOrDie();
  auto checkpoint = arrow::Table::Make(
      arrow::schema(arrow::FieldVector{arrow::field("add", add->type())}), arrow::ArrayVector{add});
  ASSERT_TRUE(replay.ApplyCheckpoint(*checkpoint).ok());
  std::vector<PartitionPairs> partitions;
  auto files = replay.LiveFiles("t", nullptr, &partitions);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<std::string>{"Ab/b.parquet", "c.parquet", "d.parquet",
                                              "day=9/a.parquet"}));
  using P = PartitionPairs;
  const std::optional<std::string> null;
  EXPECT_EQ(partitions, (std::vector<P>{{{"day", "2"}, {"n", null}},
                                        {{"day", null}, {"n", null}},  // "" is null, as is none
                                        {{"day", "3"}, {"n", null}},
                                        {{"day", "1"}, {"n", "7"}}}));
  // Unpartitioned: no pairs at all.
  DeltaReplay plain;
  ASSERT_TRUE(
      plain.ApplyCommitText(Lines({kProtocol, kMetaData, Add("day=1/a.parquet")}), "t").ok());
  ASSERT_TRUE(plain.LiveFiles("t", nullptr, &partitions).ok());
  EXPECT_TRUE(partitions.empty());
}

TEST(DeltaLog, MappedPartitionValuesAreKeyedByPhysicalNames) {
  const std::string schema =
      R"({\"type\":\"struct\",\"fields\":[{\"name\":\"day\",\"type\":\"string\",)"
      R"(\"nullable\":true,\"metadata\":{\"delta.columnMapping.physicalName\":\"col-1\"}}]})";
  const std::string meta = R"({"metaData":{"partitionColumns":["day"],"schemaString":")" + schema +
                           R"(","configuration":{"delta.columnMapping.mode":"name"}}})";
  std::vector<PartitionPairs> partitions;
  DeltaReplay replay;
  ASSERT_TRUE(replay
                  .ApplyCommitText(Lines({kProtocol, meta, AddIn("x/a.parquet", R"({"col-1":"5"})"),
                                          AddIn("y/b.parquet", R"({"day":"6"})")}),
                                   "t")
                  .ok());
  auto files = replay.LiveFiles("t", nullptr, &partitions);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::optional<std::string> null;
  EXPECT_EQ(partitions, (std::vector<PartitionPairs>{{{"day", "5"}}, {{"day", null}}}));
  // A partition column the schema does not hold.
  DeltaReplay unknown;
  std::string other = meta;
  other.replace(other.find(R"(["day"])"), 7, R"(["hour"])");
  auto status = unknown.ApplyCommitText(Lines({kProtocol, other, Add("a.parquet")}), "t");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("partition column 'hour' is not a column"), std::string::npos)
      << status.message();
}

TEST(DeltaLog, ColumnMappingNoneAndKnownFeaturesRead) {
  auto files =
      Replay({Lines({R"({"protocol":{"minReaderVersion":3,"readerFeatures":)"
                     R"(["columnMapping","deletionVectors","timestampNtz"]}})",
                     R"({"metaData":{"configuration":{"delta.columnMapping.mode":"none"}}})",
                     Add("a.parquet")})});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<std::string>{"a.parquet"}));
}

TEST(DeltaLog, BadCommitsAreInvalidData) {
  for (const std::string text :
       {"null", " null\n{}\n", "\nnull", "{}\n1\n", "", "\n  \n", "not json", "{\"add\": 5}\n",
        "[1, 2]\n", "{\"add\":{\"path\":\"a\"}", "\xff\xfe"}) {
    auto parsed = ParseDeltaCommit(text);
    if (parsed.ok()) {
      DeltaReplay replay;
      auto applied = replay.ApplyCommit(**parsed);
      if (applied.ok()) continue;  // read as no actions: LiveFiles then refuses (no protocol)
      EXPECT_EQ(KindOf(applied), ErrorKind::kInvalidData) << text;
    } else {
      EXPECT_EQ(KindOf(parsed.status()), ErrorKind::kInvalidData) << text;
    }
  }
  EXPECT_FALSE(ParseDeltaCommit("").ok());
  EXPECT_FALSE(ParseDeltaCommit("not json").ok());
  const auto binary = ParseDeltaCommit(std::string("\0\x01{}", 4));
  ASSERT_FALSE(binary.ok());
  EXPECT_NE(binary.status().message().find("NUL byte at offset 0"), std::string::npos);
}

// A table folder on disk: files written, a log of the given commits.
void WriteLog(const std::filesystem::path& table, const std::vector<std::string>& commits,
              int64_t first = 0) {
  for (size_t i = 0; i < commits.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "%020lld.json", static_cast<long long>(first + i));
    WriteText(table / "_delta_log" / name, commits[i]);
  }
}

TEST(DeltaLog, TheCatalogReadsOnlyTheLiveFilesOfATable) {
  TempDir dir;
  const auto table = dir.path() / "t";
  WriteIdFile(table / "old.parquet", 0, 100, 50);  // overwritten
  WriteIdFile(table / "new one.parquet", 100, 10, 50);
  WriteIdFile(table / "_under.parquet", 200, 5, 50);  // live: the log, not the name, decides
  WriteText(table / "_delta_log" / "_last_checkpoint", "{}");
  WriteText(table / "_delta_log" / "00000000000000000000.crc", "{}");
  WriteLog(table,
           {Lines({kProtocol, kMetaData, Add("old.parquet")}),
            Lines({Remove("old.parquet"), Add("new%20one.parquet"), Add("_under.parquet")})});
  auto catalog = Catalog::Open({table.string()}).ValueOrDie();
  ASSERT_EQ(catalog->files().size(), 2u);
  EXPECT_EQ(catalog->files()[0].rel_path, "_under.parquet");
  EXPECT_EQ(catalog->files()[1].rel_path, "new one.parquet");
  EXPECT_EQ(catalog->num_rows(), 15);
  // A folder holding the table (and a plain file beside it): the table's live files only.
  WriteIdFile(dir.path() / "plain.parquet", 300, 7, 50);
  // A folder inside the table: its live files only (its log lies above it).
  WriteIdFile(table / "sub" / "live.parquet", 400, 3, 50);
  WriteIdFile(table / "sub" / "dead.parquet", 500, 4, 50);
  WriteLog(table,
           {Lines({Add("sub/live.parquet"), Add("sub/dead.parquet")}),
            Lines({Remove("sub/dead.parquet")})},
           2);
  EXPECT_EQ(Catalog::Open({(table / "sub").string()}).ValueOrDie()->num_rows(), 3);
  EXPECT_EQ(Catalog::Open({table.string()}).ValueOrDie()->num_rows(), 18);
  // A table in a hidden folder is not data (its log would fail: its file is missing).
  WriteLog(dir.path() / "_temporary" / "t", {Lines({kProtocol, Add("gone.parquet")})});
  auto outer = Catalog::Open({dir.path().string()}).ValueOrDie();
  EXPECT_EQ(outer->num_rows(), 25);
}

// A deletion vector of `rows` (below 65,536) as a DV file frames it: the
// portable RoaringBitmapArray of one array container, its size and CRC-32.
std::string DvFrame(const std::vector<uint16_t>& rows, std::string* bitmap) {
  auto put = [](std::string* out, uint64_t v, int bytes, bool big) {
    for (int i = 0; i < bytes; ++i) {
      const int shift = 8 * (big ? bytes - 1 - i : i);
      *out += static_cast<char>((v >> shift) & 0xFF);
    }
  };
  bitmap->clear();
  put(bitmap, 1681511377, 4, false);  // magic
  put(bitmap, 1, 8, false);           // one 32-bit bucket
  put(bitmap, 0, 4, false);           // its key
  put(bitmap, 12346, 4, false);       // a Roaring bitmap without runs
  put(bitmap, 1, 4, false);           // of one container
  put(bitmap, 0, 2, false);
  put(bitmap, rows.size() - 1, 2, false);
  put(bitmap, 16, 4, false);  // its offset
  for (uint16_t r : rows) put(bitmap, r, 2, false);
  std::string frame;
  put(&frame, bitmap->size(), 4, true);
  frame += *bitmap;
  put(&frame, arrow::internal::crc32(0, bitmap->data(), bitmap->size()), 4, true);
  return frame;
}

TEST(DeltaLog, TheCatalogLeavesOutDeletedRowsReadFromSeveralFiles) {
  TempDir dir;
  const auto table = dir.path() / "t";
  std::vector<std::string> lines = {
      R"({"protocol":{"minReaderVersion":3,"readerFeatures":["deletionVectors"]}})", kMetaData};
  // Twelve files, each deleting rows {f, 10 + f} in a .bin file of its own (twelve
  // DELETE commits), one more with its vector inline and one without any.
  for (int f = 0; f < 14; ++f) {
    const std::string name = "f" + std::to_string(f) + ".parquet";
    WriteIdFile(table / name, 100 * f, 40, 16);
    std::string bitmap;
    const std::string frame =
        DvFrame({static_cast<uint16_t>(f), static_cast<uint16_t>(10 + f)}, &bitmap);
    std::string dv;
    if (f < 12) {
      const auto bin = table / ("deletion_vector_" + std::to_string(f) + ".bin");
      WriteText(bin, std::string(1, '\x01') + frame);
      dv = R"({"storageType":"p","pathOrInlineDv":")" + bin.string() +
           R"(","offset":1,"sizeInBytes":)" + std::to_string(bitmap.size()) +
           R"(,"cardinality":2})";
    } else if (f == 12) {
      continue;  // (written below, inline)
    }
    lines.push_back(R"({"add":{"path":")" + name + R"(","deletionVector":)" +
                    (dv.empty() ? "null" : dv) + "}}");
  }
  // f12: the protocol's inline example (rows 3, 4, 7, 11, 18, 29).
  lines.push_back(
      R"({"add":{"path":"f12.parquet","deletionVector":{"storageType":"i","pathOrInlineDv":)"
      R"("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L","sizeInBytes":40,"cardinality":6}}})");
  std::string commit;
  for (const auto& line : lines) commit += line + "\n";
  WriteLog(table, {commit});
  auto catalog = Catalog::Open({table.string()});
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ((*catalog)->files().size(), 14u);
  EXPECT_TRUE((*catalog)->has_deletions());
  int64_t deleted = 0;
  for (const auto& file : (*catalog)->files()) {
    const int f = std::stoi(file.rel_path.substr(1));
    if (f == 13) {
      EXPECT_FALSE(file.deleted);
      continue;
    }
    ASSERT_TRUE(file.deleted) << file.rel_path;
    deleted += file.deleted->count;
    if (f < 12) {
      ASSERT_EQ(file.deleted->runs.size(), 2u);
      EXPECT_EQ(file.deleted->runs[0].begin, f);
      EXPECT_EQ(file.deleted->runs[1].begin, 10 + f);
    }
  }
  EXPECT_EQ(deleted, 12 * 2 + 6);
}

TEST(DeltaLog, CheckpointsAndGaps) {
  TempDir dir;
  const auto table = dir.path() / "t";
  WriteIdFile(table / "a.parquet", 0, 10, 50);
  WriteIdFile(table / "b.parquet", 10, 10, 50);
  WriteIdFile(table / "c.parquet", 20, 10, 50);
  // Versions 0 and 1 cleaned up after checkpoint 1; an incomplete checkpoint 2.
  {
    arrow::StringBuilder paths;
    ASSERT_TRUE(paths.AppendValues({"a.parquet", "b.parquet"}).ok());
    auto path_array = paths.Finish().ValueOrDie();
    auto add =
        arrow::StructArray::Make({path_array}, {arrow::field("path", arrow::utf8())}).ValueOrDie();
    arrow::Int32Builder versions;
    ASSERT_TRUE(versions.AppendValues({1, 1}).ok());
    auto protocol = arrow::StructArray::Make({versions.Finish().ValueOrDie()},
                                             {arrow::field("minReaderVersion", arrow::int32())})
                        .ValueOrDie();
    auto rows = arrow::Table::Make(arrow::schema({arrow::field("add", add->type()),
                                                  arrow::field("protocol", protocol->type())}),
                                   {add, protocol});
    std::filesystem::create_directories(table / "_delta_log");
    auto out = arrow::io::FileOutputStream::Open(
                   (table / "_delta_log" / "00000000000000000001.checkpoint.parquet").string())
                   .ValueOrDie();
    ASSERT_TRUE(parquet::arrow::WriteTable(*rows, arrow::default_memory_pool(), out, 10).ok());
    ASSERT_TRUE(out->Close().ok());
  }
  WriteText(table / "_delta_log" / "00000000000000000002.checkpoint.0000000001.0000000002.parquet",
            "half of a checkpoint: never read");
  WriteLog(table, {Lines({Remove("a.parquet"), Add("c.parquet")}), Lines({Add("a.parquet")})}, 2);
  auto catalog = Catalog::Open({table.string()}).ValueOrDie();
  EXPECT_EQ(catalog->num_rows(), 30);  // b, c, a again
  // A gap after the checkpoint.
  std::filesystem::remove(table / "_delta_log" / "00000000000000000002.json");
  auto gap = Catalog::Open({table.string()});
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("no commit 2 after its checkpoint 1"), std::string::npos)
      << gap.status().message();
  // A huge version number after a gap: an error at once, not a loop over the numbers.
  WriteText(table / "_delta_log" / "09223372036854775806.json", Lines({Add("b.parquet")}));
  WriteText(table / "_delta_log" / "09223372036854775807.checkpoint.parquet", "never read");
  auto huge = Catalog::Open({table.string()});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("no commit 2 "), std::string::npos)
      << huge.status().message();
  std::filesystem::remove(table / "_delta_log" / "09223372036854775806.json");
  // A live file that is gone.
  WriteLog(table, {Lines({Add("gone.parquet")})}, 2);
  auto missing = Catalog::Open({table.string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(KindOf(missing.status()), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("'gone.parquet'"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace shardfeed
