#include "exec/assemble.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>

#include "exec/decode.h"
#include "exec/stack_matrix.h"
#include "exec/stage_clock.h"
#include "shardfeed/catalog.h"
#include "util/test_util.h"

namespace shardfeed {
namespace {

using testing::TempDir;

// Six rows in two row groups of three:
//   id  int64          0..5
//   x   float32        id / 2, null where id % 3 == 1
//   y   float32        id + 0.25
//   z   int32          10 * id
//   seq list<int32>    id % 3 elements id, id + 1, ...; null at id 3
std::shared_ptr<const Catalog> WriteTestFile(const TempDir& dir) {
  arrow::Int64Builder ids;
  arrow::FloatBuilder xs, ys;
  arrow::Int32Builder zs;
  auto seq_values = std::make_shared<arrow::Int32Builder>();
  arrow::ListBuilder seqs(arrow::default_memory_pool(), seq_values);
  for (int64_t id = 0; id < 6; ++id) {
    EXPECT_TRUE(ids.Append(id).ok());
    EXPECT_TRUE((id % 3 == 1 ? xs.AppendNull() : xs.Append(static_cast<float>(id) / 2)).ok());
    EXPECT_TRUE(ys.Append(static_cast<float>(id) + 0.25f).ok());
    EXPECT_TRUE(zs.Append(static_cast<int32_t>(10 * id)).ok());
    if (id == 3) {
      EXPECT_TRUE(seqs.AppendNull().ok());
      continue;
    }
    EXPECT_TRUE(seqs.Append().ok());
    for (int64_t k = 0; k < id % 3; ++k) {
      EXPECT_TRUE(seq_values->Append(static_cast<int32_t>(id + k)).ok());
    }
  }
  auto schema =
      arrow::schema({arrow::field("id", arrow::int64()), arrow::field("x", arrow::float32()),
                     arrow::field("y", arrow::float32()), arrow::field("z", arrow::int32()),
                     arrow::field("seq", arrow::list(arrow::int32()))});
  auto table = arrow::Table::Make(
      schema, {ids.Finish().ValueOrDie(), xs.Finish().ValueOrDie(), ys.Finish().ValueOrDie(),
               zs.Finish().ValueOrDie(), seqs.Finish().ValueOrDie()});
  const std::string path = (dir.path() / "part-0.parquet").string();
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  EXPECT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, 3).ok());
  EXPECT_TRUE(out->Close().ok());
  return Catalog::Open({dir.path().string()}).ValueOrDie();
}

OutputOptions TestOptions() {
  OutputOptions options;
  options.all_columns = false;
  options.columns = {"id", "x", "seq"};
  options.stacks = {{"yz", {"y", "z"}}};
  options.with_sample_id = true;
  options.fill_null = -1;
  return options;
}

std::shared_ptr<const DecodedRowGroup> Decode(const Catalog& catalog, int32_t rg,
                                              const Layout& layout) {
  DecodeHooks hooks;
  hooks.clock = std::make_shared<StageClock>(false);
  return DecodeRowGroup(catalog, rg, layout, RandomKey{}, hooks).ValueOrDie();
}

const OutputArray& Find(const Batch& batch, const std::string& name) {
  for (const auto& a : batch.arrays) {
    if (a.name == name) return a;
  }
  ADD_FAILURE() << "no output " << name;
  return batch.arrays.front();
}

template <typename T>
std::vector<T> Values(const OutputArray& a) {
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  return std::vector<T>(a.buffer->As<T>(), a.buffer->As<T>() + n);
}

TEST(Assemble, GathersSamplesFromDecodedRowGroups) {
  TempDir dir;
  auto catalog = WriteTestFile(dir);
  ASSERT_EQ(catalog->row_groups().size(), 2u);
  auto layout = MakeLayout(*catalog->schema(), TestOptions()).ValueOrDie();
  auto rg0 = Decode(*catalog, 0, layout), rg1 = Decode(*catalog, 1, layout);

  // Samples: ids 3, 2, 5, 1 (row group 1 row 0, row group 0 row 2, ...).
  GatherInput in;
  in.slots = {rg0.get(), rg1.get()};
  in.slot = {1, 0, 1, 0};
  in.row = {0, 2, 2, 1};
  auto batch = Assemble(layout, in, 7).ValueOrDie();
  EXPECT_EQ(batch->index, 7);
  EXPECT_EQ(batch->num_rows, 4);

  const auto& id = Find(*batch, "id");
  EXPECT_EQ(id.dtype, DType::kInt64);
  EXPECT_EQ(id.shape, std::vector<int64_t>{4});
  EXPECT_EQ(Values<int64_t>(id), (std::vector<int64_t>{3, 2, 5, 1}));

  // Nulls became fill_null.
  const auto& x = Find(*batch, "x");
  EXPECT_EQ(x.dtype, DType::kFloat32);
  EXPECT_EQ(Values<float>(x), (std::vector<float>{1.5f, 1.0f, 2.5f, -1.0f}));

  // A variable-length list: zero-padded to the longest, with its lengths; the
  // null list became an empty one.
  const auto& seq = Find(*batch, "seq");
  EXPECT_EQ(seq.dtype, DType::kInt32);
  EXPECT_EQ(seq.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(Values<int32_t>(seq), (std::vector<int32_t>{0, 0, 2, 3, 5, 6, 1, 0}));
  EXPECT_EQ(Values<int64_t>(Find(*batch, "seq_lengths")), (std::vector<int64_t>{0, 2, 2, 1}));

  // float32 stacked with int32: a float32 [rows, 2] matrix.
  const auto& yz = Find(*batch, "yz");
  EXPECT_EQ(yz.dtype, DType::kFloat32);
  EXPECT_EQ(yz.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(Values<float>(yz), (std::vector<float>{3.25f, 30, 2.25f, 20, 5.25f, 50, 1.25f, 10}));

  EXPECT_EQ(Values<int64_t>(Find(*batch, "sample_id")), (std::vector<int64_t>{3, 2, 5, 1}));
}

TEST(Assemble, DecodingStoresStacksAsRowMajorMatrices) {
  TempDir dir;
  auto catalog = WriteTestFile(dir);
  auto layout = MakeLayout(*catalog->schema(), TestOptions()).ValueOrDie();
  auto rg1 = Decode(*catalog, 1, layout);
  ASSERT_EQ(layout.outputs[3].name, "yz");
  ASSERT_TRUE(rg1->stacks[3]);
  const auto* m = reinterpret_cast<const float*>(rg1->stacks[3]->data());
  EXPECT_EQ(std::vector<float>(m, m + 6), (std::vector<float>{3.25f, 30, 4.25f, 40, 5.25f, 50}));
  EXPECT_FALSE(rg1->stacks[0]);  // only stacks have a matrix
}

TEST(Assemble, TransposeStackConvertsEachColumn) {
  // Columns built in memory: uint8 and float64 stacked as float64.
  auto schema =
      arrow::schema({arrow::field("a", arrow::uint8()), arrow::field("b", arrow::float64())});
  OutputOptions options;
  options.stacks = {{"ab", {"a", "b"}}};
  auto layout = MakeLayout(*schema, options).ValueOrDie();
  const auto& plan = layout.outputs[0];
  ASSERT_EQ(plan.dtype, DType::kFloat64);
  const std::vector<uint8_t> a = {1, 2, 3};
  const std::vector<double> b = {0.5, 1.5, 2.5};
  std::vector<DecodedColumn> columns(2);
  columns[0].dtype = DType::kUInt8;
  columns[0].values = a.data();
  columns[0].count = 3;
  columns[1].dtype = DType::kFloat64;
  columns[1].values = reinterpret_cast<const uint8_t*>(b.data());
  columns[1].count = 3;
  std::vector<double> out(6);
  ASSERT_TRUE(
      TransposeStack(layout, plan, columns, 3, reinterpret_cast<uint8_t*>(out.data())).ok());
  EXPECT_EQ(out, (std::vector<double>{1, 0.5, 2, 1.5, 3, 2.5}));
}

TEST(Assemble, StackMembersWrittenInPartsMakeTheWholeMatrix) {
  // 7 float32 members (the 4-byte path, with a remainder) and 3 int16 + float32
  // (the converting path), 5 rows, written [0, 3) then [3, width): as at once.
  for (bool mixed : {false, true}) {
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::vector<std::string> names;
    for (int c = 0; c < 7; ++c) {
      names.push_back("c" + std::to_string(c));
      fields.push_back(
          arrow::field(names.back(), mixed && c < 3 ? arrow::int16() : arrow::float32()));
    }
    OutputOptions options;
    options.stacks = {{"m", names}};
    auto layout = MakeLayout(*arrow::schema(fields), options).ValueOrDie();
    const auto& plan = layout.outputs[0];
    const int64_t rows = 5;
    std::vector<std::vector<float>> f(7, std::vector<float>(rows));
    std::vector<std::vector<int16_t>> i(7, std::vector<int16_t>(rows));
    std::vector<DecodedColumn> columns(7);
    for (int c = 0; c < 7; ++c) {
      for (int64_t r = 0; r < rows; ++r) {
        f[c][static_cast<size_t>(r)] = static_cast<float>(10 * r + c) + 0.5f;
        i[c][static_cast<size_t>(r)] = static_cast<int16_t>(10 * r + c);
      }
      const bool small = mixed && c < 3;
      columns[c].dtype = small ? DType::kInt16 : DType::kFloat32;
      columns[c].values = small ? reinterpret_cast<const uint8_t*>(i[c].data())
                                : reinterpret_cast<const uint8_t*>(f[c].data());
      columns[c].count = rows;
    }
    auto whole = MakeStackMatrix(layout, plan, columns, rows).ValueOrDie();
    auto parts = NewStackMatrix(plan, rows).ValueOrDie();
    ASSERT_TRUE(FillStackMembers(layout, plan, columns, rows, 0, 3, &parts).ok());
    ASSERT_TRUE(FillStackMembers(layout, plan, columns, rows, 3, 100, &parts).ok());
    ASSERT_EQ(parts.count, whole.count);
    EXPECT_EQ(std::memcmp(parts.values, whole.values, static_cast<size_t>(whole.owned->size())), 0)
        << "mixed=" << mixed;
    const auto* m = reinterpret_cast<const float*>(whole.values);
    EXPECT_EQ(m[2 * 7 + 5], 25.5f);                  // row 2, member 5
    EXPECT_EQ(m[4 * 7 + 1], mixed ? 41.0f : 41.5f);  // row 4, member 1
  }
}

TEST(Assemble, LargeMatricesWrittenSixteenMembersAtATimeHoldEveryValue) {
  // Past 8 MiB a slab of at most 16 float32 members takes the streaming kernel
  // (four rows at a time): 37 members (two slabs of 16 and one of 5), a row
  // count that is not a multiple of 4, into a pooled matrix that held other
  // values before.
  constexpr int kMembers = 36;
  constexpr int64_t kRows = 60'003;  // x 36 x 4 bytes = 8.6 MB
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::string> names;
  for (int c = 0; c < kMembers; ++c) {
    names.push_back("c" + std::to_string(c));
    fields.push_back(arrow::field(names.back(), arrow::float32()));
  }
  OutputOptions options;
  options.stacks = {{"m", names}};
  auto layout = MakeLayout(*arrow::schema(fields), options).ValueOrDie();
  const auto& plan = layout.outputs[0];
  std::vector<std::vector<float>> f(kMembers, std::vector<float>(kRows));
  std::vector<DecodedColumn> columns(kMembers);
  for (int c = 0; c < kMembers; ++c) {
    for (int64_t r = 0; r < kRows; ++r)
      f[c][static_cast<size_t>(r)] = static_cast<float>(r * 64 + c);
    columns[c].dtype = DType::kFloat32;
    columns[c].values = reinterpret_cast<const uint8_t*>(f[c].data());
    columns[c].count = kRows;
  }
  auto budget = std::make_shared<MemoryBudget>(0);
  auto pool = std::make_shared<MatrixPool>(budget, 4, 0);
  const int64_t bytes = kRows * kMembers * 4;
  {
    auto before = pool->Take(bytes).ValueOrDie();
    std::memset(before->mutable_data(), 0xAB, static_cast<size_t>(bytes));
  }
  auto parts = NewStackMatrix(plan, kRows, pool.get()).ValueOrDie();
  ASSERT_EQ(pool->counts().reused, 1);
  for (size_t first = 0; first < kMembers; first += kFusedColumns) {
    ASSERT_TRUE(
        FillStackMembers(layout, plan, columns, kRows, first, first + kFusedColumns, &parts).ok());
  }
  const auto* m = reinterpret_cast<const float*>(parts.values);
  int64_t wrong = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int c = 0; c < kMembers; ++c)
      wrong += m[r * kMembers + c] != static_cast<float>(r * 64 + c);
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Assemble, NullsWithoutFillNullNameTheColumnAndRow) {
  TempDir dir;
  auto catalog = WriteTestFile(dir);
  auto options = TestOptions();
  options.fill_null.reset();
  options.columns = {"x"};
  auto layout = MakeLayout(*catalog->schema(), options).ValueOrDie();
  DecodeHooks hooks;
  hooks.clock = std::make_shared<StageClock>(false);
  auto st = DecodeRowGroup(*catalog, 0, layout, RandomKey{}, hooks).status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("column 'x'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("null value at row 1"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace shardfeed
