#include "shardfeed/engine.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "shardfeed/status.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;
using testing::WriteIdFile;

struct Stream {
  std::vector<int64_t> ids;
  std::vector<float> v;
  int64_t batches = 0;
};

arrow::Result<Stream> RunEpoch(const std::shared_ptr<const Catalog>& catalog,
                               PlanOptions plan_options, EngineOptions options) {
  ARROW_ASSIGN_OR_RAISE(auto plan, EpochPlan::Make(catalog->RowGroupRows(), plan_options));
  ARROW_ASSIGN_OR_RAISE(auto engine, Engine::Make(catalog, plan, options));
  Stream s;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto batch, engine->Next());
    if (!batch) break;
    ++s.batches;
    for (const auto& a : batch->arrays) {
      if (a.name == "id") {
        s.ids.insert(s.ids.end(), a.buffer->As<int64_t>(), a.buffer->As<int64_t>() + a.shape[0]);
      } else if (a.name == "v") {
        s.v.insert(s.v.end(), a.buffer->As<float>(), a.buffer->As<float>() + a.shape[0] * 3);
      }
    }
  }
  return s;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteIdFile(dir_.path() / "a.parquet", 0, 500, 64);
    WriteIdFile(dir_.path() / "b.parquet", 500, 333, 100);
    catalog_ = Catalog::Open({dir_.path().string()}).ValueOrDie();
  }
  TempDir dir_;
  std::shared_ptr<const Catalog> catalog_;
};

TEST_F(EngineTest, StreamIsTheSameForAnyThreadCountAndTiming) {
  PlanOptions p;
  p.batch_size = 32;
  p.seed = 5;
  p.window_row_groups = 3;
  EngineOptions o;
  o.num_threads = 1;
  const Stream base = RunEpoch(catalog_, p, o).ValueOrDie();
  EXPECT_EQ(base.batches, 833 / 32);
  for (int threads : {2, 3, 8}) {
    o.num_threads = threads;
    o.debug_max_delay_us = threads == 8 ? 300 : 0;
    const Stream s = RunEpoch(catalog_, p, o).ValueOrDie();
    EXPECT_EQ(s.ids, base.ids) << threads << " threads";
  }
  // Values travel with their ids: v = (id, id + 1, id + 2).
  for (size_t i = 0; i < base.ids.size(); ++i) {
    ASSERT_EQ(base.v[i * 3], static_cast<float>(base.ids[i]));
    ASSERT_EQ(base.v[i * 3 + 2], static_cast<float>(base.ids[i] + 2));
  }
}

TEST_F(EngineTest, StridedEnginesInterleaveToTheFullStream) {
  PlanOptions p;
  p.batch_size = 50;
  p.drop_last = false;
  EngineOptions o;
  o.num_threads = 2;
  const Stream full = RunEpoch(catalog_, p, o).ValueOrDie();
  std::vector<Stream> parts;
  for (int64_t k = 0; k < 3; ++k) {
    o.batch_offset = k;
    o.batch_stride = 3;
    parts.push_back(RunEpoch(catalog_, p, o).ValueOrDie());
  }
  std::vector<int64_t> merged;
  for (int64_t b = 0; b < full.batches; ++b) {
    const auto& part = parts[static_cast<size_t>(b % 3)];
    const auto j = static_cast<size_t>(b / 3);
    const size_t size = std::min<size_t>(50, full.ids.size() - static_cast<size_t>(b) * 50);
    merged.insert(merged.end(), part.ids.begin() + static_cast<int64_t>(j * 50),
                  part.ids.begin() + static_cast<int64_t>(j * 50 + size));
  }
  EXPECT_EQ(merged, full.ids);
}

// DataLoader workers resuming a pass: worker k of 3 starts at batch 5 + k.
TEST_F(EngineTest, StridedEnginesResumeTogether) {
  PlanOptions p;
  p.batch_size = 50;
  EngineOptions o;
  o.num_threads = 2;
  const Stream full = RunEpoch(catalog_, p, o).ValueOrDie();
  o.start_batch = 5;
  o.batch_stride = 3;
  std::vector<Stream> parts;
  for (int64_t k = 0; k < 3; ++k) {
    o.batch_offset = k;
    parts.push_back(RunEpoch(catalog_, p, o).ValueOrDie());
  }
  std::vector<int64_t> merged;
  for (int64_t j = 0; j < full.batches - 5; ++j) {
    const auto& part = parts[static_cast<size_t>(j % 3)];
    const auto at = part.ids.begin() + (j / 3) * 50;
    merged.insert(merged.end(), at, at + 50);
  }
  EXPECT_EQ(merged, std::vector<int64_t>(full.ids.begin() + 5 * 50, full.ids.end()));
}

TEST_F(EngineTest, ResumeGivesTheRestOfTheEpoch) {
  PlanOptions p;
  p.batch_size = 40;
  EngineOptions o;
  o.num_threads = 3;
  const Stream full = RunEpoch(catalog_, p, o).ValueOrDie();
  o.start_batch = 7;
  const Stream rest = RunEpoch(catalog_, p, o).ValueOrDie();
  EXPECT_EQ(rest.batches, full.batches - 7);
  EXPECT_TRUE(std::equal(rest.ids.begin(), rest.ids.end(), full.ids.begin() + 7 * 40));
}

TEST_F(EngineTest, StoppingEarlyJoinsWorkers) {
  PlanOptions p;
  p.batch_size = 8;
  EngineOptions o;
  o.num_threads = 4;
  o.queue_depth = 1;
  auto plan = EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie();
  auto engine = Engine::Make(catalog_, plan, o).ValueOrDie();
  ASSERT_TRUE(engine->Next().ValueOrDie());
  engine->Stop();
  EXPECT_TRUE(engine->Next().status().IsCancelled());
  engine.reset();  // must not hang
}

TEST_F(EngineTest, MissingColumnIsAnError) {
  OutputOptions out;
  out.all_columns = false;
  out.columns = {"id", "nope"};
  auto r = DescribeOutputs(*catalog_->schema(), out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kColumnNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST(EngineErrors, CorruptRowGroupReachesTheConsumerAtItsPosition) {
  TempDir dir;
  const auto path = dir.path() / "c.parquet";
  WriteIdFile(path, 0, 4000, 1000);
  // Overwrite the middle of the file (page data of a later row group) with garbage.
  {
    std::FILE* f = std::fopen(path.string().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const long size = static_cast<long>(std::filesystem::file_size(path));
    std::fseek(f, size / 2, SEEK_SET);
    std::vector<char> junk(static_cast<size_t>(size / 8), '\x7f');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  auto catalog = Catalog::Open({path.string()}).ValueOrDie();
  PlanOptions p;
  p.shuffle = false;
  p.batch_size = 500;
  EngineOptions o;
  o.num_threads = 2;
  auto plan = EpochPlan::Make(catalog->RowGroupRows(), p).ValueOrDie();
  auto engine = Engine::Make(catalog, plan, o).ValueOrDie();
  int delivered = 0;
  arrow::Status error;
  while (true) {
    auto r = engine->Next();
    if (!r.ok()) {
      error = r.status();
      break;
    }
    if (!*r) break;
    ++delivered;
  }
  ASSERT_FALSE(error.ok()) << "garbage in the page data went unnoticed";
  EXPECT_NE(error.message().find("c.parquet"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("row group"), std::string::npos) << error.message();
  EXPECT_GE(delivered, 2);  // the intact first row group was delivered before the error
  EXPECT_EQ(engine->Next().status().message(), error.message());  // sticky
}

}  // namespace
}  // namespace shardfeed
