#include "shardfeed/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <parquet/file_reader.h>

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

void AppendIds(const Batch& batch, std::vector<int64_t>* ids) {
  for (const auto& a : batch.arrays) {
    if (a.name == "id") {
      ids->insert(ids->end(), a.buffer->As<int64_t>(), a.buffer->As<int64_t>() + a.shape[0]);
    }
  }
}

arrow::Result<Stream> RunEpoch(const std::shared_ptr<const Catalog>& catalog,
                               PlanOptions plan_options, EngineOptions options) {
  ARROW_ASSIGN_OR_RAISE(auto plan, EpochPlan::Make(catalog->RowGroupRows(), plan_options));
  ARROW_ASSIGN_OR_RAISE(auto engine, Engine::Make(catalog, plan, options));
  Stream s;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto batch, engine->Next());
    if (!batch) break;
    ++s.batches;
    AppendIds(*batch, &s.ids);
    for (const auto& a : batch->arrays) {
      if (a.name == "v") {
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

TEST_F(EngineTest, AnyMemoryLimitGivesTheSameStream) {
  // The budget decides when a row group is decoded, never what a batch holds:
  // down to one byte (every decode but the consumer's next goes over it) the
  // stream is the same, for any thread count, timing, stride and resume.
  PlanOptions p;
  p.batch_size = 32;
  p.seed = 9;
  p.window_row_groups = 3;
  EngineOptions o;
  o.num_threads = 1;
  o.memory_limit = 0;
  const Stream base = RunEpoch(catalog_, p, o).ValueOrDie();
  for (int64_t limit : {int64_t{1}, int64_t{20000}, int64_t{1} << 30}) {
    for (int threads : {1, 3, 8}) {
      o.memory_limit = limit;
      o.num_threads = threads;
      o.debug_max_delay_us = threads == 8 ? 200 : 0;
      EXPECT_EQ(RunEpoch(catalog_, p, o).ValueOrDie().ids, base.ids)
          << "limit " << limit << ", " << threads << " threads";
    }
  }
  o.memory_limit = 1;
  o.num_threads = 3;
  o.start_batch = 4;
  o.batch_offset = 1;
  o.batch_stride = 2;
  const Stream part = RunEpoch(catalog_, p, o).ValueOrDie();
  std::vector<int64_t> expected;
  for (int64_t b = 5; b < base.batches; b += 2) {
    expected.insert(expected.end(), base.ids.begin() + b * 32, base.ids.begin() + (b + 1) * 32);
  }
  EXPECT_EQ(part.ids, expected);
}

TEST_F(EngineTest, StatsCountTheMemoryItHolds) {
  PlanOptions p;
  p.batch_size = 32;
  p.window_row_groups = 2;
  EngineOptions o;
  o.num_threads = 2;
  o.memory_limit = 1;  // everything over the limit: only the next unit's decodes run
  auto plan = EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie();
  auto engine = Engine::Make(catalog_, plan, o).ValueOrDie();
  int64_t batches = 0;
  while (engine->Next().ValueOrDie()) ++batches;
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.memory_limit, 1);
  EXPECT_EQ(s.ready_batches_capacity, 1);  // a quarter of a byte holds no batch: one
  EXPECT_GT(s.memory_peak_decoded, 0);
  EXPECT_GT(s.memory_peak_batches, 0);
  EXPECT_GE(s.memory_peak, s.memory_peak_decoded);
  EXPECT_GT(s.memory_over_limit, 0);
  // At most the consumer's window and what it decodes next: 2 + 2 row groups.
  EXPECT_LE(s.peak_live_row_groups, 4);

  o.memory_limit = 0;
  o.num_threads = 2;
  auto free_engine = Engine::Make(catalog_, plan, o).ValueOrDie();
  while (free_engine->Next().ValueOrDie()) {
  }
  const EngineStats f = free_engine->stats();
  EXPECT_EQ(f.memory_waits, 0);
  EXPECT_EQ(f.memory_over_limit, 0);
  EXPECT_EQ(f.ready_batches_capacity, 2 * o.queue_depth);
  EXPECT_EQ(batches, f.batches);
}

TEST_F(EngineTest, DecodesStartedOnceTheLastWindowBeganAndNothingIsBookedAtTheEnd) {
  PlanOptions p;
  p.batch_size = 32;
  p.window_row_groups = 2;  // 12 row groups: 6 windows
  EngineOptions o;
  o.num_threads = 2;
  o.memory_limit = 1;  // no decode ahead: only the consumer's next unit's run
  auto plan = EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie();
  auto engine = Engine::Make(catalog_, plan, o).ValueOrDie();
  ASSERT_TRUE(engine->Next().ValueOrDie());
  EXPECT_FALSE(engine->decodes_started());
  EXPECT_GT(engine->memory_held(), 0);  // the first window
  while (engine->Next().ValueOrDie()) {
  }
  EXPECT_TRUE(engine->decodes_started());
  EXPECT_EQ(engine->stats().memory_used, 0);
  EXPECT_GE(engine->memory_held(), 0);  // idle blocks kept for reuse, if any
}

TEST_F(EngineTest, DecodesStartedLooksAtTheLastWindowOfTheRanksSlice) {
  // Rank 0 of 2 reads the first half of the epoch: its last window is in the
  // middle, and the epoch's last window is none of its business.
  PlanOptions p;
  p.batch_size = 32;
  p.window_row_groups = 2;
  p.world_size = 2;
  p.rank = 0;
  EngineOptions o;
  o.num_threads = 2;
  o.memory_limit = 1;
  auto plan = EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie();
  auto engine = Engine::Make(catalog_, plan, o).ValueOrDie();
  ASSERT_TRUE(engine->Next().ValueOrDie());
  EXPECT_FALSE(engine->decodes_started());
  while (engine->Next().ValueOrDie()) {
  }
  EXPECT_TRUE(engine->decodes_started());
}

TEST_F(EngineTest, AnEngineStartedBesideAnotherOfItsStreamTakesOnlyTheRoomLeft) {
  // The next pass's engine, made while this pass is served (the same
  // EngineLeftovers), books nothing past the limit the two share until its
  // consumer's first next(); from then on it runs as any engine, and both
  // streams are their epochs' own.
  PlanOptions p;
  p.batch_size = 32;
  p.window_row_groups = 2;
  EngineOptions o;
  o.num_threads = 2;
  o.memory_limit = 0;
  p.epoch = 0;
  const Stream base0 = RunEpoch(catalog_, p, o).ValueOrDie();
  p.epoch = 1;
  const Stream base1 = RunEpoch(catalog_, p, o).ValueOrDie();

  auto leftovers = std::make_shared<EngineLeftovers>();
  o.leftovers = leftovers;
  o.memory_limit = 1;  // what the current pass holds fills it
  p.epoch = 0;
  auto current =
      Engine::Make(catalog_, EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie(), o)
          .ValueOrDie();
  std::vector<int64_t> ids0;
  auto take = [](Engine& engine, std::vector<int64_t>* ids) {
    auto batch = engine.Next().ValueOrDie();
    if (batch) AppendIds(*batch, ids);
    return batch != nullptr;
  };
  ASSERT_TRUE(take(*current, &ids0));
  ASSERT_GT(current->memory_held(), 0);
  p.epoch = 1;
  auto next = Engine::Make(catalog_, EpochPlan::Make(catalog_->RowGroupRows(), p).ValueOrDie(), o)
                  .ValueOrDie();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its workers try
  EXPECT_EQ(next->stats().memory_used, 0);
  EXPECT_EQ(next->stats().row_groups_decoded, 0);
  EXPECT_EQ(next->stats().memory_over_limit, 0);
  while (take(*current, &ids0)) {
  }
  current.reset();
  // With the current pass gone the limit still has no room: the next pass's
  // decodes go ahead once its consumer asks (the budget never stops a stream).
  std::vector<int64_t> ids1;
  while (take(*next, &ids1)) {
  }
  EXPECT_EQ(ids0, base0.ids);
  EXPECT_EQ(ids1, base1.ids);
  EXPECT_GT(next->stats().memory_over_limit, 0);
}

TEST_F(EngineTest, PlanMemoryChoosesTheWindowFromTheLimit) {
  const auto rows = catalog_->RowGroupRows();
  PlanOptions p;
  p.window_row_groups = 0;
  p.batch_size = 32;
  EngineOptions o;
  o.memory_limit = 0;
  auto unlimited = PlanMemory(catalog_, rows, p, o).ValueOrDie();
  EXPECT_EQ(unlimited.window_row_groups, 4);
  EXPECT_GT(unlimited.row_group_bytes, 0);
  o.memory_limit = 1;
  EXPECT_EQ(PlanMemory(catalog_, rows, p, o).ValueOrDie().window_row_groups, 1);
  o.memory_limit = int64_t{1} << 40;  // everything fits: one window of all
  auto all = PlanMemory(catalog_, rows, p, o).ValueOrDie();
  EXPECT_EQ(all.window_row_groups, static_cast<int64_t>(rows.size()));
  // A window twice as large for twice the limit (rounding aside).
  o.memory_limit = 8 * unlimited.row_group_bytes;
  const int64_t w1 = PlanMemory(catalog_, rows, p, o).ValueOrDie().window_row_groups;
  o.memory_limit *= 2;
  const int64_t w2 = PlanMemory(catalog_, rows, p, o).ValueOrDie().window_row_groups;
  EXPECT_GE(w2, 2 * w1 - 1);
  EXPECT_LE(w2, 2 * w1 + 1);
  // The limit suggested for 16 row groups (all, when fewer) gives that window.
  const int64_t target = std::min<int64_t>(16, static_cast<int64_t>(rows.size()));
  o.memory_limit = unlimited.limit_for_target_window;
  EXPECT_EQ(PlanMemory(catalog_, rows, p, o).ValueOrDie().window_row_groups, target);
  if (target > 1) {
    o.memory_limit /= 2;
    EXPECT_LT(PlanMemory(catalog_, rows, p, o).ValueOrDie().window_row_groups, target);
  }
  o.memory_limit = 8 * unlimited.row_group_bytes;
  // Mixing: equal row groups in windows of w mix about w ways; no shuffle, 1.
  p.window_row_groups = 3;
  const double mix = PlanMemory(catalog_, rows, p, o).ValueOrDie().expected_mixing;
  EXPECT_GT(mix, 2.5);
  EXPECT_LT(mix, 3.5);
  p.shuffle = false;
  EXPECT_EQ(PlanMemory(catalog_, rows, p, o).ValueOrDie().expected_mixing, 1.0);
  // Untrusted sizes.
  EXPECT_FALSE(PlanMemory(catalog_, std::span<const int64_t>(rows).first(1), p, o).ok());
  p.window_row_groups = -1;
  EXPECT_FALSE(PlanMemory(catalog_, rows, p, o).ok());
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

// Writes `rows` rows of `width` float32 columns c00, c01, ...: c<j> = row * 100 + j.
void WriteWideFile(const std::filesystem::path& path, int64_t rows, int width,
                   int64_t row_group_size) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (int j = 0; j < width; ++j) {
    arrow::FloatBuilder b;
    for (int64_t r = 0; r < rows; ++r) (void)b.Append(static_cast<float>(r * 100 + j));
    fields.push_back(arrow::field((j < 10 ? "c0" : "c") + std::to_string(j), arrow::float32()));
    columns.push_back(b.Finish().ValueOrDie());
  }
  auto table = arrow::Table::Make(arrow::schema(fields), columns);
  auto out = arrow::io::FileOutputStream::Open(path.string()).ValueOrDie();
  ASSERT_TRUE(
      parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, row_group_size).ok());
  ASSERT_TRUE(out->Close().ok());
}

// A 48-column stack over 12,000 rows in 3,000-row groups whose every value
// says where it belongs (row id * 100 + column), batches of 250.
struct WideStack {
  static constexpr int kWidth = 48;
  static constexpr int64_t kRows = 12000;

  WideStack() {
    WriteWideFile(dir.path() / "wide.parquet", kRows, kWidth, 3000);
    catalog = Catalog::Open({dir.path().string()}).ValueOrDie();
    plan.batch_size = 250;
    plan.seed = 3;
    plan.shuffle = true;
    plan.window_row_groups = 1;
    options.output.all_columns = false;
    options.output.with_sample_id = true;
    StackSpec stack;
    stack.name = "s";
    for (int j = 0; j < kWidth; ++j)
      stack.columns.push_back((j < 10 ? "c0" : "c") + std::to_string(j));
    options.output.stacks = {stack};
  }

  // One epoch's values in stream order, each checked against its row id;
  // the engine's stats in *stats.
  std::vector<float> Run(const EngineOptions& o, EngineStats* stats = nullptr,
                         int consumer_sleep_us = 0) {
    auto epoch = EpochPlan::Make(catalog->RowGroupRows(), plan).ValueOrDie();
    auto engine = Engine::Make(catalog, epoch, o).ValueOrDie();
    std::vector<float> values;
    int64_t rows = 0;
    while (true) {
      auto batch = engine->Next().ValueOrDie();
      if (!batch) break;
      const OutputArray* ids = nullptr;
      const OutputArray* matrix = nullptr;
      for (const auto& a : batch->arrays) (a.name == "s" ? matrix : ids) = &a;
      EXPECT_TRUE(ids != nullptr && matrix != nullptr);
      for (int64_t r = 0; r < ids->shape[0]; ++r) {
        const int64_t id = ids->buffer->As<int64_t>()[r];
        for (int j = 0; j < kWidth; ++j) {
          const float got = matrix->buffer->As<float>()[r * kWidth + j];
          if (got != static_cast<float>(id * 100 + j)) {
            ADD_FAILURE() << "row " << id << ", column " << j << ": " << got;
            return values;
          }
          values.push_back(got);
        }
      }
      rows += ids->shape[0];
      if (consumer_sleep_us > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(consumer_sleep_us));
    }
    EXPECT_EQ(rows, kRows);
    engine->Stop();
    if (stats) *stats = engine->stats();
    return values;
  }

  EngineOptions With(int threads, int64_t limit, int slow_part_us) const {
    EngineOptions o = options;
    o.num_threads = threads;
    o.memory_limit = limit;
    o.debug_slow_stage = slow_part_us > 0 ? "tile" : "";
    o.debug_slow_us = slow_part_us;
    return o;
  }

  TempDir dir;
  std::shared_ptr<const Catalog> catalog;
  PlanOptions plan;
  EngineOptions options;
};

// Row groups large against the limit (a window of one, nothing decoded ahead):
// the worker waiting for the row group being decoded takes parts of its decode
// (a stack's tile reads, 16 columns each), writing into the same matrix.  The
// stream is the one thread's, and every row is its own values.
TEST(EngineSharedDecode, WaitingWorkersTakePartsOfTheDecodeAndTheStreamHoldsIt) {
  WideStack wide;
  const auto base = wide.Run(wide.With(1, 0, 0));
  EngineStats stats;
  // Each part sleeps 20 ms (a test hook): the other worker, waiting for the
  // row group (a matrix is 576 KB, the limit less than two), takes some.
  EXPECT_EQ(wide.Run(wide.With(2, 900'000, 20'000), &stats), base);
  EXPECT_GT(stats.decode_parts_shared, 0);
  EXPECT_EQ(wide.Run(wide.With(3, 1, 0)), base);
}

// With room to decode ahead and a slow consumer, the ready batches fill up:
// one worker decodes the next row group ahead and the others take parts of
// that decode between the units they build.  The stream holds.
TEST(EngineSharedDecode, WorkersAheadOfASlowConsumerShareTheDecodesAheadAndTheStreamHolds) {
  WideStack wide;
  const auto base = wide.Run(wide.With(1, 0, 0));
  EngineOptions o = wide.With(3, 0, 5'000);
  o.queue_depth = 1;
  EngineStats stats;
  EXPECT_EQ(wide.Run(o, &stats, 2'000), base);
  EXPECT_GT(stats.decode_parts_shared, 0);
}

// A corrupt page in one part of a row group's decode (columns 16-31 of the
// stack), run by whichever worker takes that part: the consumer gets every
// batch before that row group's, then an error naming the file, the row group
// and the column; no worker hangs.
TEST(EngineSharedDecode, AnErrorInAPartRunByAnyWorkerReachesTheConsumerByName) {
  WideStack wide;
  const auto base = wide.Run(wide.With(1, 0, 0));
  const auto path = wide.dir.path() / "wide.parquet";
  {
    auto reader = parquet::ParquetFileReader::OpenFile(path.string());
    auto chunk = reader->metadata()->RowGroup(2)->ColumnChunk(20);
    const int64_t start = chunk->data_page_offset();
    const int64_t size = chunk->total_compressed_size();
    reader->Close();
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(start);
    for (int64_t i = 0; i < size; ++i) out.put('\xff');
  }
  wide.catalog = Catalog::Open({wide.dir.path().string()}).ValueOrDie();
  for (int threads : {1, 3}) {
    EngineOptions o = wide.With(threads, 0, threads > 1 ? 3'000 : 0);
    o.queue_depth = 1;
    auto plan = EpochPlan::Make(wide.catalog->RowGroupRows(), wide.plan).ValueOrDie();
    auto engine = Engine::Make(wide.catalog, plan, o).ValueOrDie();
    size_t values = 0;
    arrow::Status error;
    while (true) {
      auto batch = engine->Next();
      if (!batch.ok()) {
        error = batch.status();
        break;
      }
      ASSERT_NE(*batch, nullptr) << "the corrupt page went unnoticed";
      for (const auto& a : (*batch)->arrays) {
        if (a.name != "s") continue;
        const auto n = static_cast<size_t>(a.shape[0] * WideStack::kWidth);
        ASSERT_LE(values + n, base.size());
        EXPECT_TRUE(std::equal(a.buffer->As<float>(), a.buffer->As<float>() + n,
                               base.begin() + static_cast<std::ptrdiff_t>(values)));
        values += n;
      }
    }
    const std::string message = error.message();
    EXPECT_EQ(KindOf(error), ErrorKind::kInvalidData) << message;
    EXPECT_NE(message.find("wide.parquet"), std::string::npos) << message;
    EXPECT_NE(message.find("row group 2"), std::string::npos) << message;
    EXPECT_NE(message.find("column 'c20'"), std::string::npos) << message;
    EXPECT_EQ(engine->Next().status().message(), message);  // sticky
  }
}

// An engine leaves its idle matrices and batch buffers to the next one given
// the same EngineLeftovers (a loader's next epoch), which decodes into them
// from its first row group on; neither the stream nor the values change.
// (One window of the four row groups: each engine holds four matrices at
// once, and none is idle before the last window is done.)
TEST(EngineLeftoversTest, TheNextEngineTakesTheIdleMemoryAndItsStreamIsUnchanged) {
  WideStack wide;
  wide.plan.window_row_groups = 4;
  const auto base = wide.Run(wide.With(2, 0, 0));
  auto leftovers = std::make_shared<EngineLeftovers>();
  EngineOptions o = wide.With(2, 8 << 20, 0);
  o.leftovers = leftovers;
  EngineStats first;
  EXPECT_EQ(wide.Run(o, &first), base);
  // Made before the first batch (nothing was carried over) or by the decodes.
  EXPECT_EQ(first.matrices_allocated + first.matrices_prefaulted, 4);
  EXPECT_GT(first.matrices_prefaulted, 0);
  // What the first engine left: its four matrices, and batch buffers.
  constexpr int64_t kMatrixBytes = 3000 * WideStack::kWidth * 4;
  EXPECT_GT(leftovers->bytes(), 4 * kMatrixBytes);
  EngineStats second;
  EXPECT_EQ(wide.Run(o, &second), base);
  // The second engine allocated none.
  EXPECT_EQ(second.matrices_allocated, 0);
  EXPECT_EQ(second.matrices_reused, 4);
  EXPECT_GT(leftovers->bytes(), 4 * kMatrixBytes);
  leftovers->Clear();
  EXPECT_EQ(leftovers->bytes(), 0);
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
